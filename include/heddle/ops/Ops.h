// Ops: builders that read like the math and derive each op's index space and projections from its
// semantics (DESIGN.md "Ops"). `Ops ops(graph); auto y = ops.relu(ops.add(ops.einsum("mk,kn->mn",
// x, w), b));`. The first user error (bad shapes or attributes) is kept and poisons later ops.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/support/Result.h"

namespace heddle {

/// The value id builders return after an error; builders given it return it again.
inline constexpr ValueId kNoValue = -1;

/// Options of conv2d. Spatial pairs are (height, width).
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};    ///< default 1, 1; each > 0
  std::vector<int64_t> padding = {0, 0};   ///< (ph, pw) or (top, left, bottom, right); >= 0
  std::vector<int64_t> dilation = {1, 1};  ///< default 1, 1; each > 0
  int64_t groups = 1;                      ///< default 1; divides both channel counts
};

/// Options of max and average pooling.
struct Pool2dOptions {
  std::vector<int64_t> kernel;            ///< required, each > 0
  std::vector<int64_t> stride;            ///< default: the kernel
  std::vector<int64_t> padding = {0, 0};  ///< (ph, pw) or (top, left, bottom, right); >= 0
};

/// Hyper-parameters of AdamW (defaults of PyTorch's AdamW).
struct AdamWOptions {
  double lr = 1e-3;            ///< learning rate
  double beta1 = 0.9;          ///< first-moment decay
  double beta2 = 0.999;        ///< second-moment decay
  double eps = 1e-8;           ///< denominator guard
  double weight_decay = 0.01;  ///< decoupled weight decay
};

/// Hyper-parameters of SGD with momentum.
struct SgdOptions {
  double lr = 0.01;           ///< learning rate
  double momentum = 0.9;      ///< velocity decay
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient
};

/// Appends ops to a graph. Builders validate shapes and attributes; on the first violation they
/// record a Diagnostic naming the op, the field and the constraint, and return kNoValue.
class Ops {
 public:
  /// Builds into `g`, which must outlive this object.
  explicit Ops(Graph& g) : g_(g) {}

  /// Declares a graph input / parameter; marks an output.
  ValueId input(std::string name, TensorType type);
  ValueId param(std::string name, TensorType type);
  void output(ValueId v);

  /// Success, or the first error recorded.
  Status status() const;
  bool ok() const { return !failed_; }
  /// Records an error from outside (model builders checking configs); the first one wins.
  void fail(std::string message);
  Graph& graph() { return g_; }
  const TensorType& type(ValueId v) const { return g_.type(v); }
  /// Shape of `v`.
  const IVec& shape(ValueId v) const { return g_.type(v).shape(); }

  // --- contractions ---
  /// Any contraction written as an explicit einsum spec (`"bhqd,bhkd->bhqk"`); one or two
  /// operands; letters name index dims; letters absent from the output are summed.
  ValueId einsum(std::string_view spec, ValueId a, ValueId b = kNoValue);
  /// `x @ w` over the last dim of x (x: [..., k], w: [k, n]).
  ValueId linear(ValueId x, ValueId w);
  /// Embedding lookup as a one-hot contraction `[ids..., v:sum, h]`: ids int [...], table [V, H].
  ValueId embedding(ValueId ids, ValueId table);

  // --- elementwise ---
  /// A unary elementwise kind (relu, gelu, exp, ...). `scale` needs attribute alpha.
  ValueId unary(OpKind kind, ValueId x, Attrs attrs = {});
  ValueId relu(ValueId x) { return unary(OpKind::kRelu, x); }
  ValueId gelu(ValueId x) { return unary(OpKind::kGelu, x); }
  ValueId gelu_tanh(ValueId x) { return unary(OpKind::kGeluTanh, x); }
  ValueId silu(ValueId x) { return unary(OpKind::kSilu, x); }
  ValueId tanh(ValueId x) { return unary(OpKind::kTanh, x); }
  ValueId exp(ValueId x) { return unary(OpKind::kExp, x); }
  ValueId scale(ValueId x, double alpha) { return unary(OpKind::kScale, x, {{"alpha", alpha}}); }
  /// A tensor of x's shape filled with `value` (x is read for its shape only).
  ValueId fill_like(ValueId x, double value) { return unary(OpKind::kFill, x, {{"value", value}}); }
  /// An activation by name: relu, gelu, gelu_tanh, silu, sigmoid, tanh, identity.
  ValueId activation(std::string_view name, ValueId x);
  /// A binary kind with NumPy broadcasting (add, sub, mul, div, maximum, minimum, pow).
  ValueId binary(OpKind kind, ValueId a, ValueId b);
  ValueId add(ValueId a, ValueId b) { return binary(OpKind::kAdd, a, b); }
  ValueId sub(ValueId a, ValueId b) { return binary(OpKind::kSub, a, b); }
  ValueId mul(ValueId a, ValueId b) { return binary(OpKind::kMul, a, b); }
  ValueId div(ValueId a, ValueId b) { return binary(OpKind::kDiv, a, b); }
  /// `cond ? a : b` with broadcasting; cond is bool.
  ValueId where(ValueId cond, ValueId a, ValueId b);
  /// Sets positions with key index > query index (last two dims) to -inf.
  ValueId causal_mask(ValueId x);
  /// Rotary position embedding of x [..., s, heads, d] (d even), angle pos * theta^(-2i/d).
  ValueId rotary(ValueId x, double theta = 10000.0);

  // --- reductions and normalizations ---
  /// reduce_sum / reduce_mean / reduce_max / reduce_min over `axes` (negative counts from the
  /// end); the reduced dims become reduce dims of the index space.
  ValueId reduce(OpKind kind, ValueId x, std::vector<int64_t> axes, bool keepdims = false);
  /// Softmax / log-softmax along `axis`: that dim lives inside the window.
  ValueId softmax(ValueId x, int64_t axis = -1);
  ValueId log_softmax(ValueId x, int64_t axis = -1);
  /// LayerNorm over the last dim with gain gamma and shift beta [H]; pass kNoValue for both to
  /// normalize without them.
  ValueId layernorm(ValueId x, ValueId gamma, ValueId beta, double eps = 1e-5);
  /// RMSNorm over the last dim with gain gamma [H].
  ValueId rmsnorm(ValueId x, ValueId gamma, double eps = 1e-6);
  /// Per-position cross-entropy: logits [..., V], labels int [...] -> f32 [...].
  ValueId cross_entropy(ValueId logits, ValueId labels);

  // --- windows ---
  /// NCHW convolution, w [CO, C/groups, KH, KW].
  ValueId conv2d(ValueId x, ValueId w, const Conv2dOptions& o = {});
  ValueId maxpool2d(ValueId x, const Pool2dOptions& o);
  ValueId avgpool2d(ValueId x, const Pool2dOptions& o);
  /// Mean over H and W: [N, C, H, W] -> [N, C], H and W as reduce dims.
  ValueId global_avgpool(ValueId x);

  // --- layout ---
  /// Same elements, new shape; the index space is the common refinement of both shapes.
  ValueId reshape(ValueId x, std::vector<int64_t> shape);
  /// out.shape[i] = x.shape[perm[i]].
  ValueId transpose(ValueId x, std::vector<int64_t> perm);
  /// x[starts:ends] per dim (all dims given).
  ValueId slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends);
  /// Concatenation along `axis`; each input is a padded read shifted by its offset.
  ValueId concat(const std::vector<ValueId>& xs, int64_t axis);
  /// NumPy broadcast of x to `shape`.
  ValueId broadcast(ValueId x, std::vector<int64_t> shape);

  // --- optimizers (results: updated param and state) ---
  /// {param', velocity'}.
  std::vector<ValueId> sgd_momentum(ValueId param, ValueId grad, ValueId velocity,
                                    const SgdOptions& o);
  /// {param', m', v'}; `step` is the 1-based step used for bias correction.
  std::vector<ValueId> adamw(ValueId param, ValueId grad, ValueId m, ValueId v,
                             const AdamWOptions& o, int64_t step = 1);

  // --- mixture of experts ---
  /// Top-k gating (GShard and Mixtral use k = 2): probs [S, E] -> {combine weights, dispatch
  /// mask}, both [S, E, C] (C = capacity). Each token takes its k most probable experts (ties to
  /// the lower expert index), their gates renormalized to sum to 1; the mask is 1 where a token
  /// took a slot. Tokens over an expert's capacity are dropped. Needs 1 <= k <= E. Single-point
  /// index space.
  std::vector<ValueId> topk_gating(ValueId probs, int64_t k, int64_t capacity);

  /// Appends a fully formed op (used by autodiff). Results get fresh names. Returns the result
  /// ids, or empty after an earlier error.
  std::vector<ValueId> emit(Op op, const std::vector<TensorType>& result_types);
  /// A fresh value name `<stem><N>`.
  std::string fresh_name(std::string_view stem = "t");

 private:
  bool bad(std::initializer_list<ValueId> vs) const;
  ValueId emit1(Op op, TensorType t);
  ValueId error(std::string_view op, std::string message);
  ValueId norm_like(OpKind kind, ValueId x, int64_t axis, std::vector<ValueId> extra, Attrs attrs);
  ValueId pool(OpKind kind, ValueId x, const Pool2dOptions& o);

  Graph& g_;
  bool failed_ = false;
  Diagnostic error_;
  int64_t next_ = 0;
};

}  // namespace heddle
