// ONNX import: turns a model exported by `torch.onnx.export` (opsets 13-17) into a heddle Graph
// built with the op builders, plus the initializers as parameter data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Options of ONNX import.
struct OnnxImportOptions {
  /// Values of dynamic (symbolic) input dims by name, from `--dim NAME=VALUE`; default empty.
  /// Every symbolic dim of a graph input must be bound.
  std::map<std::string, int64_t> dims;
  /// Directory external-data files are resolved against; default empty: the model file's
  /// directory (import_onnx_file) or the current directory (import_onnx_bytes).
  std::string base_dir;
  /// Re-batching (`--batch N`): dim 0 of every graph input whose dim 0 equals the first input's
  /// (the batch the model was exported with; a dynamic one, unless bound by `dims`) becomes
  /// `batch`; shapes computed from the inputs (torch's Shape -> Gather -> Reshape) follow. Checked
  /// against an import at the exported batch: a shape fixed at export that pins the batch (a
  /// builder rejects the new shapes, or an output loses its batch axis) is a diagnostic naming
  /// the node that merged the batch away. Default 0: the batch as exported.
  int64_t batch = 0;
  /// Training (`--train --loss`): the model's single output becomes a scalar loss against a new
  /// last graph input `labels`: "cross_entropy" (int64 labels, one per row of logits [batch, ...,
  /// classes]), "mse" (labels shaped as the output), or "auto" (cross_entropy for outputs of rank
  /// 2 or more, else mse). Default empty: the model's outputs as exported.
  std::string loss;
};

/// An imported model: the graph, the data of its parameters, and what is missing.
struct ImportedModel {
  Graph graph;  ///< built with the Ops builders; inputs in the ONNX graph-input order

  /// Data of every parameter whose initializer carried data (or was folded from ones that did).
  std::map<ValueId, Tensor> weights;
  /// Names of parameters without data (stripped initializers, absent external files).
  std::vector<std::string> missing_weights;
  /// Names of parameters holding constants rather than weights (Constant nodes, integer and
  /// boolean initializers, what folds from those alone, and data the importer synthesizes:
  /// pooling divisors, zero biases), in creation order: a training step never updates them
  /// (TrainStepOptions::frozen). A causal mask's -inf fill value is one; AdamW's weight decay
  /// would turn it into NaN.
  std::vector<std::string> constants;
  int64_t opset = 0;  ///< the default-domain opset the model declares
  /// Names of the symbolic dims of the graph inputs (bound through OnnxImportOptions::dims),
  /// sorted, each once; the CLI rejects a `--dim` naming none of them.
  std::vector<std::string> dynamic_dims;
  /// Dim 0 of the first graph input as the file fixes it; 0 when it is dynamic.
  int64_t exported_batch = 0;

  /// True when every parameter has data, so the model can run.
  bool has_all_weights() const { return missing_weights.empty(); }
};

/// The ONNX op types the importer maps, sorted.
const std::vector<std::string>& onnx_supported_ops();

/// Imports the ONNX file at `path`. Diagnostics (all located at `path`): unreadable, truncated or
/// non-protobuf files; opsets outside 13-17; unbound dynamic dims; unsupported ops (naming the op
/// type, node name and opset, and listing onnx_supported_ops()); shapes the builders reject.
Result<ImportedModel> import_onnx_file(const std::string& path,
                                       const OnnxImportOptions& options = {});

/// The ONNX file at `path` re-serialized with its large float initializers marked as external
/// data in an absent file: it imports as the same graph with those parameters data-free, quickly
/// (planning re-imports a model at several batch sizes). Diagnostics as import_onnx_file().
Result<std::string> read_onnx_shapes_only(const std::string& path);

/// Imports a serialized ModelProto held in `bytes`; `name` labels diagnostics.
Result<ImportedModel> import_onnx_bytes(const std::string& bytes, const std::string& name,
                                        const OnnxImportOptions& options = {});

}  // namespace heddle
