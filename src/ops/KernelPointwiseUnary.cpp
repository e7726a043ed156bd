// The unary pointwise loops with the kind a constant, and their elementwise gradients
// (KernelPointwiseFast.h).
#include "KernelPointwiseFast.h"
#include "Scalar.h"

namespace heddle::kdetail {

namespace {

// Unary kind K with the kind a constant (the switch folds away, the loop can vectorize).
template <OpKind K>
void unary_as(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
              const std::vector<Tensor*>& outs, Store mode, double alpha) {
  pointwise(
      op, box, ins, outs, mode,
      [alpha](const float* in, float* out, const int64_t*, int64_t) {
        out[0] = unary_f<K>(in[0], alpha);
      },
      true, {}, kMergeRows);
}

// elementwise_grad of unary kind K: dy * f'(x).
template <OpKind K>
void unary_grad_as(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, Store mode, double alpha) {
  pointwise(
      op, box, ins, outs, mode,
      [alpha](const float* in, float* out, const int64_t*, int64_t) {
        if constexpr (K == OpKind::kGelu || K == OpKind::kSilu)
          out[0] = in[0] * unary_deriv_f<K>(in[1], alpha);
        else
          out[0] = static_cast<float>(in[0] * unary_deriv(K, in[1], alpha));
      },
      true, {}, kMergeRows);
}

}  // namespace

bool unary_fast(OpKind k, const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                const std::vector<Tensor*>& outs, Store mode, double alpha, bool grad) {
#define HEDDLE_UNARY_CASE(K)                                     \
  case OpKind::K:                                                \
    if (grad)                                                    \
      unary_grad_as<OpKind::K>(op, box, ins, outs, mode, alpha); \
    else                                                         \
      unary_as<OpKind::K>(op, box, ins, outs, mode, alpha);      \
    return true;
  switch (k) {
    HEDDLE_UNARY_CASE(kRelu)
    HEDDLE_UNARY_CASE(kGelu)
    HEDDLE_UNARY_CASE(kGeluTanh)
    HEDDLE_UNARY_CASE(kSilu)
    HEDDLE_UNARY_CASE(kSigmoid)
    HEDDLE_UNARY_CASE(kTanh)
    HEDDLE_UNARY_CASE(kExp)
    HEDDLE_UNARY_CASE(kScale)
    HEDDLE_UNARY_CASE(kNeg)
    HEDDLE_UNARY_CASE(kSquare)
    HEDDLE_UNARY_CASE(kIdentity)
    HEDDLE_UNARY_CASE(kCast)
    default:
      return false;
  }
#undef HEDDLE_UNARY_CASE
}

}  // namespace heddle::kdetail
