// The binary pointwise loops with the kind a constant, and the elementwise gradients of add, sub
// and mul (KernelPointwiseFast.h).
#include "KernelPointwiseFast.h"
#include "Scalar.h"

namespace heddle::kdetail {

namespace {

// Binary kind K in float (for + - * / max min the float result equals the double one rounded).
template <OpKind K>
void binary_as(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs, Store mode) {
  pointwise(
      op, box, ins, outs, mode,
      [](const float* in, float* out, const int64_t*, int64_t) {
        out[0] = static_cast<float>(binary_value(K, in[0], in[1]));
      },
      true, {}, kMergeRows);
}

}  // namespace

bool binary_fast(OpKind k, const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                 const std::vector<Tensor*>& outs, Store mode) {
  switch (k) {
    case OpKind::kAdd:
      return binary_as<OpKind::kAdd>(op, box, ins, outs, mode), true;
    case OpKind::kSub:
      return binary_as<OpKind::kSub>(op, box, ins, outs, mode), true;
    case OpKind::kMul:
      return binary_as<OpKind::kMul>(op, box, ins, outs, mode), true;
    case OpKind::kDiv:
      return binary_as<OpKind::kDiv>(op, box, ins, outs, mode), true;
    case OpKind::kMaximum:
      return binary_as<OpKind::kMaximum>(op, box, ins, outs, mode), true;
    case OpKind::kMinimum:
      return binary_as<OpKind::kMinimum>(op, box, ins, outs, mode), true;
    default:
      return false;
  }
}

// elementwise_grad of add, sub and mul reading only the inputs the derivative needs (dy, and the
// other factor for mul), the same arithmetic as the generic lambda.
bool binary_grad_fast(OpKind f, int wrt, const Op& op, const Box& box,
                      const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs,
                      Store mode) {
  auto lam = [&](auto g, std::vector<size_t> pick) {
    pointwise(op, box, ins, outs, mode, g, true, pick, kMergeRows);
    return true;
  };
  if (f == OpKind::kAdd || (f == OpKind::kSub && wrt == 0))
    return lam([](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0]; }, {0});
  if (f == OpKind::kSub)
    return lam([](const float* in, float* out, const int64_t*, int64_t) { out[0] = -in[0]; }, {0});
  if (f == OpKind::kMul)
    return lam([](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0] * in[1]; },
               {0, wrt == 0 ? size_t{2} : size_t{1}});
  return false;
}

}  // namespace heddle::kdetail
