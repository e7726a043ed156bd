// The op vocabulary of the IR: every op kind, its text name, arity and attribute schema. The IR
// owns the names; the ops library owns what they compute (signatures and kernels).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/Attribute.h"

namespace heddle {

// X(enum, "name", category, min_inputs, max_inputs (-1: any), results, attribute schema)
// Schema entries are `name:type` with type i (int), f (float), s (string), I (int list); a
// trailing `!` marks a required attribute.
#define HEDDLE_OP_KINDS(X)                                                                     \
  X(kEinsum, "einsum", kContraction, 1, 2, 1, "spec:s!")                                       \
  X(kRelu, "relu", kUnary, 1, 1, 1, "")                                                        \
  X(kGelu, "gelu", kUnary, 1, 1, 1, "")                                                        \
  X(kGeluTanh, "gelu_tanh", kUnary, 1, 1, 1, "")                                               \
  X(kSilu, "silu", kUnary, 1, 1, 1, "")                                                        \
  X(kSigmoid, "sigmoid", kUnary, 1, 1, 1, "")                                                  \
  X(kTanh, "tanh", kUnary, 1, 1, 1, "")                                                        \
  X(kExp, "exp", kUnary, 1, 1, 1, "")                                                          \
  X(kLog, "log", kUnary, 1, 1, 1, "")                                                          \
  X(kSqrt, "sqrt", kUnary, 1, 1, 1, "")                                                        \
  X(kRsqrt, "rsqrt", kUnary, 1, 1, 1, "")                                                      \
  X(kNeg, "neg", kUnary, 1, 1, 1, "")                                                          \
  X(kAbs, "abs", kUnary, 1, 1, 1, "")                                                          \
  X(kSquare, "square", kUnary, 1, 1, 1, "")                                                    \
  X(kReciprocal, "reciprocal", kUnary, 1, 1, 1, "")                                            \
  X(kScale, "scale", kUnary, 1, 1, 1, "alpha:f!")                                              \
  X(kCast, "cast", kUnary, 1, 1, 1, "")                                                        \
  X(kIdentity, "identity", kUnary, 1, 1, 1, "")                                                \
  X(kAdd, "add", kBinary, 2, 2, 1, "")                                                         \
  X(kSub, "sub", kBinary, 2, 2, 1, "")                                                         \
  X(kMul, "mul", kBinary, 2, 2, 1, "")                                                         \
  X(kDiv, "div", kBinary, 2, 2, 1, "")                                                         \
  X(kMaximum, "maximum", kBinary, 2, 2, 1, "")                                                 \
  X(kMinimum, "minimum", kBinary, 2, 2, 1, "")                                                 \
  X(kPow, "pow", kBinary, 2, 2, 1, "")                                                         \
  X(kWhere, "where", kSelect, 3, 3, 1, "")                                                     \
  X(kReduceSum, "reduce_sum", kReduction, 1, 1, 1, "")                                         \
  X(kReduceMean, "reduce_mean", kReduction, 1, 1, 1, "")                                       \
  X(kReduceMax, "reduce_max", kReduction, 1, 1, 1, "")                                         \
  X(kReduceMin, "reduce_min", kReduction, 1, 1, 1, "")                                         \
  X(kSoftmax, "softmax", kNormalization, 1, 1, 1, "axis:i")                                    \
  X(kLogSoftmax, "log_softmax", kNormalization, 1, 1, 1, "axis:i")                             \
  X(kLayerNorm, "layernorm", kNormalization, 1, 3, 1, "eps:f")                                 \
  X(kRmsNorm, "rmsnorm", kNormalization, 1, 2, 1, "eps:f")                                     \
  X(kConv2d, "conv2d", kWindow, 2, 3, 1, "stride:I,padding:I,dilation:I,groups:i")             \
  X(kMaxPool2d, "maxpool2d", kWindow, 1, 1, 1, "kernel:I!,stride:I,padding:I")                 \
  X(kAvgPool2d, "avgpool2d", kWindow, 1, 1, 1, "kernel:I!,stride:I,padding:I")                 \
  X(kGlobalAvgPool, "global_avgpool", kReduction, 1, 1, 1, "")                                 \
  X(kReshape, "reshape", kLayout, 1, 1, 1, "")                                                 \
  X(kTranspose, "transpose", kLayout, 1, 1, 1, "perm:I")                                       \
  X(kSlice, "slice", kLayout, 1, 1, 1, "starts:I,ends:I")                                      \
  X(kConcat, "concat", kLayout, 1, -1, 1, "axis:i!")                                           \
  X(kBroadcast, "broadcast", kLayout, 1, 1, 1, "")                                             \
  X(kEmbedding, "embedding", kContraction, 2, 2, 1, "")                                        \
  X(kCrossEntropy, "cross_entropy", kLoss, 2, 2, 1, "")                                        \
  X(kCausalMask, "causal_mask", kUnary, 1, 1, 1, "zigzag:i")                                   \
  X(kRotary, "rotary", kWindow, 1, 1, 1, "theta:f,zigzag:i")                                   \
  X(kSgdMomentum, "sgd_momentum", kOptimizer, 3, 3, 2, "lr:f!,momentum:f,weight_decay:f")      \
  X(kAdamW, "adamw", kOptimizer, 4, 4, 3, "lr:f!,beta1:f,beta2:f,eps:f,weight_decay:f,step:i") \
  X(kElementwiseGrad, "elementwise_grad", kBinary, 2, 4, 1, "fn:s!,wrt:i,alpha:f,zigzag:i")    \
  X(kNormGrad, "norm_grad", kNormalization, 2, 4, 1, "fn:s!,wrt:i,eps:f")                      \
  X(kEmbeddingGrad, "embedding_grad", kContraction, 2, 2, 1, "")                               \
  X(kConv2dGradInput, "conv2d_grad_input", kWindow, 2, 2, 1,                                   \
    "stride:I,padding:I,dilation:I,groups:i")                                                  \
  X(kConv2dGradWeight, "conv2d_grad_weight", kWindow, 2, 2, 1,                                 \
    "stride:I,padding:I,dilation:I,groups:i")                                                  \
  X(kPool2dGrad, "pool2d_grad", kWindow, 2, 2, 1, "mode:s!,kernel:I!,stride:I!,padding:I")     \
  X(kRotaryGrad, "rotary_grad", kWindow, 1, 1, 1, "theta:f,zigzag:i")                          \
  X(kTopkGating, "topk_gating", kNormalization, 1, 1, 2, "capacity:i!,k:i")                    \
  X(kFill, "fill", kUnary, 1, 1, 1, "value:f!")

/// An op kind.
enum class OpKind : uint16_t {
#define HEDDLE_X(e, n, c, mi, ma, r, s) e,
  HEDDLE_OP_KINDS(HEDDLE_X)
#undef HEDDLE_X
};

/// What family an op belongs to; passes that treat families alike (fusion, FLOP counts) use it.
enum class OpCategory : uint8_t {
  kContraction,
  kUnary,
  kBinary,
  kSelect,
  kReduction,
  kNormalization,
  kWindow,
  kLayout,
  kLoss,
  kOptimizer,
};

/// One attribute an op kind accepts.
struct AttrSpec {
  std::string name;
  AttrType type;
  bool required;
};

/// Everything the IR knows about an op kind.
struct OpKindInfo {
  OpKind kind;
  std::string_view name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  ///< -1: any number >= min_inputs
  int num_results;
  std::vector<AttrSpec> attrs;

  /// The schema entry for attribute `attr`, or null when the kind has no such attribute.
  const AttrSpec* find_attr(std::string_view attr) const;
};

/// The table entry of `kind`.
const OpKindInfo& op_kind_info(OpKind kind);
/// The text name of `kind`.
std::string_view op_kind_name(OpKind kind);
/// Looks a kind up by its text name; nullopt when no kind has that name.
std::optional<OpKind> parse_op_kind(std::string_view name);
/// Every kind, in table order.
const std::vector<OpKindInfo>& all_op_kinds();
/// True for unary and binary elementwise kinds and select: the kinds that fuse into a chain.
bool is_elementwise(OpKind kind);

}  // namespace heddle
