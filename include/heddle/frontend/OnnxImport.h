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
};

/// An imported model: the graph, the data of its parameters, and what is missing.
struct ImportedModel {
  Graph graph;  ///< built with the Ops builders; inputs in the ONNX graph-input order

  /// Data of every parameter whose initializer carried data (or was folded from ones that did).
  std::map<ValueId, Tensor> weights;
  /// Names of parameters without data (stripped initializers, absent external files).
  std::vector<std::string> missing_weights;
  int64_t opset = 0;  ///< the default-domain opset the model declares
  /// Names of the symbolic dims of the graph inputs (bound through OnnxImportOptions::dims),
  /// sorted, each once; the CLI rejects a `--dim` naming none of them.
  std::vector<std::string> dynamic_dims;

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

/// Imports a serialized ModelProto held in `bytes`; `name` labels diagnostics.
Result<ImportedModel> import_onnx_bytes(const std::string& bytes, const std::string& name,
                                        const OnnxImportOptions& options = {});

}  // namespace heddle
