// Internal to the ONNX importer: the state one import threads through the per-family node
// handlers (OnnxMath.cpp, OnnxVision.cpp, OnnxLayout.cpp, OnnxFold.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "heddle/frontend/OnnxImport.h"
#include "heddle/ops/Ops.h"

namespace heddle::onnx_detail {

/// What an ONNX tensor name stands for while importing.
struct Entry {
  ValueId value = kNoValue;             ///< a graph value, once there is one
  std::optional<Tensor> constant;       ///< known data (initializer, Constant, folded)
  std::optional<TensorType> data_free;  ///< an initializer whose data is missing
  /// Data from a float initializer, or folded from one: trainable. Constant nodes, integer and
  /// boolean initializers and what folds from them alone are constants (never trained).
  bool weight = false;
  /// A Transpose's result not yet emitted (Importer::set_transposed): transposed_of with dims
  /// `perm`, emitted on the first value() call; a MatMul reads transposed_of instead.
  ValueId transposed_of = kNoValue;
  std::vector<int64_t> perm;
};

/// What an import at the exported batch saw, for re-batching (OnnxImportOptions::batch).
struct ExportedBatch {
  int64_t batch = 0;                   ///< the batch the file fixes
  std::map<std::string, IVec> shapes;  ///< shapes of the inputs and node outputs, by name
  /// The constant shape inputs of Reshape and Expand nodes, by name: one that is the same at the
  /// new batch was written into the file (a literal); one that changed was computed from Shape.
  std::map<std::string, std::vector<int64_t>> targets;
};

/// Where the batch sits in a value at the exported batch, when re-batching: dim `axis` of the
/// exported shape is outer x b0 x `inner` in row-major order (a graph input: axis 0, inner 1;
/// torch's `view(seq, batch * heads, d)`: axis 1, inner heads). A Reshape keeps the batch's element
/// stride, so this tells which dim of a literal Reshape target holds the batch.
struct BatchPlace {
  int64_t axis = 0;
  int64_t inner = 1;
};

class Importer;
/// Maps one node; the node's outputs must be defined on success.
using NodeHandler = Status (*)(Importer&, const onnx::NodeProto&);

/// The state of one import.
class Importer {
 public:
  /// Imports into `out.graph`, which must outlive the importer; `file` names diagnostics.
  Importer(ImportedModel& out, std::string file, int64_t opset)
      : out_(out), ops_(out.graph), file_(std::move(file)), opset_(opset) {}

  /// The builders appending to the imported graph.
  Ops& ops() { return ops_; }
  /// The default-domain opset the model declares (13-17).
  int64_t opset() const { return opset_; }

  /// Defines `name`.
  void set_value(const std::string& name, ValueId v) { entries_[name].value = v; }
  /// Defines `name` as `x` with its dims permuted by `perm` (result dim d is x's dim perm[d]),
  /// emitted as a transpose only when value(name) is first asked for (a contraction that reads
  /// `x` with its letters permuted needs no copy: transposed()).
  void set_transposed(const std::string& name, ValueId x, std::vector<int64_t> perm);
  /// The entry of `name` when it is a transpose not yet emitted, else null.
  const Entry* transposed(const std::string& name) const;
  /// Defines `name` as known data (foldable; becomes a parameter when a real op uses it).
  void set_constant(const std::string& name, Tensor t);
  /// Defines `name` as an initializer whose data is missing.
  void set_data_free(const std::string& name, TensorType t) { entries_[name].data_free = t; }
  /// True when `name` is defined (ONNX's empty name, an omitted optional input, is not).
  bool has(const std::string& name) const { return entries_.count(name) > 0; }

  /// The data of `name` when it is a known constant, else null.
  const Tensor* constant(const std::string& name) const;
  /// The type of `name`. Precondition: has(name).
  TensorType type(const std::string& name) const;
  /// `name` as a graph value; constants and data-free initializers become parameters on first use.
  Result<ValueId> value(const std::string& name);
  /// A constant integer list (shape inputs, axes). Diagnostic when `name` is not a constant.
  Result<std::vector<int64_t>> ints(const onnx::NodeProto& n, int input, const char* what) const;
  /// Records the outcome of builder calls for node `n`: the builders' first error, if any.
  Status check(const onnx::NodeProto& n);
  /// A diagnostic about node `n` located at the model file.
  Diagnostic error(const onnx::NodeProto& n, const std::string& message) const;
  /// Re-batching to batch `to` from what an import at the exported batch saw (`exported`, which
  /// outlives the importer).
  void set_rebatch(const ExportedBatch* exported, int64_t to) {
    exported_ = exported;
    batch_ = to;
  }
  /// True while importing re-batched.
  bool rebatching() const { return exported_ != nullptr; }
  /// The target of Reshape node `n` (`target`, its constant shape input) for its input, now of
  /// shape `in`, re-batched. Only a literal target (the same as at the exported batch) changes:
  /// when `in` differs from the input's exported shape in one dim, by the batch ratio, the batch
  /// is a factor of that dim, and the target dim that holds the same factor (at the same
  /// row-major position; the outermost such position first) is scaled by the ratio. Nullopt
  /// otherwise.
  std::optional<std::vector<int64_t>> rebatch_reshape(const onnx::NodeProto& n, const IVec& in,
                                                      const std::vector<int64_t>& target);
  /// Re-batching: records where the batch sits in graph input `name` (dim 0).
  void place_input_batch(const std::string& name) { batch_place_[name] = {0, 1}; }
  /// Re-batching, after node `n` (not a Reshape, which places its own output): where the batch
  /// sits in its outputs. A Transpose moves it with `perm`; other ops keep it when an output has
  /// an input's dim (aligned from the right, as broadcasting does) at the same exported size.
  void place_batch(const onnx::NodeProto& n);
  /// The target `want` of Expand node `n` for an input of shape `in`, re-batched: in a literal
  /// target (as at the exported batch), the one entry equal to the exported batch that broadcasts
  /// a size-1 (or absent) input dim becomes the new batch (torch folds
  /// `class_token.expand(x.shape[0], -1, -1)` to a constant at a fixed batch). Unchanged when
  /// several entries could be the batch.
  void rebatch_expand(const onnx::NodeProto& n, const IVec& in, std::vector<int64_t>& want) const;
  /// A fresh parameter holding `data` (named after `stem`), or without data when `data` is null.
  /// `trainable` false records it in ImportedModel::constants (fixed data a training step never
  /// updates: mask fill values, pooling divisors, synthesized zero biases).
  ValueId add_param(const std::string& stem, const TensorType& type, const Tensor* data,
                    bool trainable);
  /// Marks the entry of initializer `name` (just defined) as a trainable weight when it is float.
  void mark_initializer(const std::string& name);
  /// After folding node `n`: its outputs are weights when any of its inputs is one.
  void inherit_weight(const onnx::NodeProto& n);

 private:
  std::string unique_name(const std::string& stem) const;

  ImportedModel& out_;
  Ops ops_;
  std::string file_;
  int64_t opset_;
  std::unordered_map<std::string, Entry> entries_;
  const ExportedBatch* exported_ = nullptr;  // re-batching: what the exported batch gave
  std::unordered_map<std::string, BatchPlace> batch_place_;  // re-batching: by value name
  int64_t batch_ = 0;                                        // re-batching: the new batch
};

// Attribute access with ONNX defaults.
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt);
float attr_float(const onnx::NodeProto& n, const std::string& name, float dflt);
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                               std::vector<int64_t> dflt = {});
std::string attr_string(const onnx::NodeProto& n, const std::string& name, std::string dflt = "");
const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);

/// Decodes a TensorProto (typed fields, raw_data, or external data under `base_dir`). Returns
/// nullopt for a tensor without data; diagnostics for unsupported element types and short data.
Result<std::optional<Tensor>> tensor_from_proto(const onnx::TensorProto& t,
                                                const std::string& base_dir,
                                                const std::string& file);
/// The heddle dtype of an ONNX element type, or nullopt when heddle has none.
std::optional<DType> dtype_from_onnx(int32_t elem_type);
/// Normalises a possibly negative axis for rank `rank`.
inline int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
/// `axis` normalised into [0, rank), or a diagnostic on node `n` naming the attribute `what`.
Result<int64_t> checked_axis(const Importer& im, const onnx::NodeProto& n, int64_t axis,
                             int64_t rank, const char* what = "axis");
/// A diagnostic unless `perm` is a permutation of 0..rank-1.
Status check_perm(const Importer& im, const onnx::NodeProto& n, const std::vector<int64_t>& perm,
                  int64_t rank);

/// The shape a Reshape node asks for (input 1) for an input of shape `in`: 0 copies the input
/// dim (unless allowzero), -1 is inferred. Diagnostics for non-constant or mismatched shapes.
Result<std::vector<int64_t>> reshape_target(Importer& im, const onnx::NodeProto& n, const IVec& in);

/// The output shape of Squeeze / Unsqueeze node `n` on `in` with `axes` (validated).
Result<std::vector<int64_t>> squeezed_shape(const Importer& im, const onnx::NodeProto& n,
                                            const IVec& in, std::vector<int64_t> axes);

/// Evaluates `n` when every input is a constant and its type is foldable; false otherwise (the
/// node then goes to its handler). `Shape` folds whenever its input's type is known.
Result<bool> try_fold(Importer& im, const onnx::NodeProto& n);

// The handlers of each op family, keyed by ONNX op type.
void register_math_ops(std::map<std::string, NodeHandler>& table);
void register_layout_ops(std::map<std::string, NodeHandler>& table);
void register_vision_ops(std::map<std::string, NodeHandler>& table);
void register_recurrent_ops(std::map<std::string, NodeHandler>& table);

/// A scalar training loss on `output`, the model's single output: `cross_entropy` (logits
/// [batch, ..., classes] against a new int64 input `labels` [batch, ...], mean over positions),
/// `mse` (mean squared difference from a new input `labels` shaped as the output), or `auto`
/// (cross_entropy for outputs of rank 2 or more, else mse). Diagnostics located at `file`: an
/// unknown loss, an output the loss does not fit.
Result<ValueId> append_loss(Ops& ops, ValueId output, const std::string& loss,
                            const std::string& file);

/// The graph's nodes with torch's one-op subgraphs rewritten into that op, in place: the
/// Erf-based GELU `x * 0.5 * (1 + erf(x / sqrt(2)))` (either association) becomes a node of op
/// type `Gelu`; LayerNorm decomposed over the last axis (ReduceMean, Sub, Pow 2, ReduceMean, Add
/// eps, Sqrt, Div, Mul gamma, Add beta; 1-D initializer gamma and beta) becomes
/// `LayerNormalization`. Other nodes are kept in order.
std::vector<onnx::NodeProto> fuse_patterns(const onnx::GraphProto& g);

}  // namespace heddle::onnx_detail
