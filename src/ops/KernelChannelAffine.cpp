// A CNN's per-channel affine ops on NCHW planes: a mul or add of a value per channel (batch norm's
// scale and shift, a convolution's bias) and the mul's gradient with respect to the other operand
// (dy times the scale), one plane at a time. The fused-chain loop walks such an op row by row, and
// a per-channel operand stops its rows from merging across channels, so DenseNet-121's late planes
// (4x4, 2x2) became rows of 16 and 4 elements whose per-row cost outweighed the arithmetic. The
// same float operation per element as the chain loop, so the results are bitwise the same.
#include <atomic>

#include "KernelConvForm.h"

namespace heddle::kdetail {

namespace {

std::atomic<int64_t> served{0};

// True when `a` walks the box's planes (dims 2, 3) as contiguous runs of h * w elements.
bool plane_access(const Access& a, int64_t h, int64_t w) {
  return a.fdata && !a.padded && a.window_size() == 1 && (w == 1 || a.coef[3] == 1) &&
         (h == 1 || a.coef[2] == w);
}

// True when `a` holds one value per channel (dim 1) of the box: constant over dims 0, 2 and 3.
bool channel_access(const Access& a, const Box& box) {
  if (!a.fdata || a.padded || a.window_size() != 1) return false;
  for (int64_t d : {0, 2, 3})
    if (box.end()[d] - box.start()[d] > 1 && a.coef[d] != 0) return false;
  return true;
}

}  // namespace

bool run_channel_affine(const Op& op, const Box& box,
                        const std::function<const Tensor*(ValueId)>& tile_of, Tensor& out) {
  if (box.rank() != 4 || op.results.size() != 1 || out.is_int() || box.empty() ||
      op.space.has_reduce())
    return false;
  // The plane operand and the per-channel one, by kind: mul/add (x, s) either way round;
  // elementwise_grad of mul w.r.t. operand k: dy times the other operand.
  bool mul = op.kind == OpKind::kMul;
  int plane = -1, chan = -1;
  if ((op.kind == OpKind::kMul || op.kind == OpKind::kAdd) && op.inputs.size() == 2) {
    plane = 0;
    chan = 1;
  } else if (op.kind == OpKind::kElementwiseGrad && op.inputs.size() == 3 &&
             attr_s(op, "fn") == "mul") {
    mul = true;
    plane = 0;
    chan = attr_i(op, "wrt", 0) == 0 ? 2 : 1;
  } else {
    return false;
  }
  const int64_t h = box.end()[2] - box.start()[2], w = box.end()[3] - box.start()[3];
  auto access = [&](int k) { return Access(*tile_of(op.inputs[k].value), op.inputs[k]); };
  Access a = access(plane), s = access(chan), y(out, op.results[0]);
  if (op.kind != OpKind::kElementwiseGrad && !channel_access(s, box) && channel_access(a, box))
    std::swap(a, s);
  if (!plane_access(a, h, w) || !channel_access(s, box) || !plane_access(y, h, w)) return false;
  float* yd = out.f32();
  const int64_t hw = h * w;
  std::vector<int64_t> p(box.start().values());
  for (p[0] = box.start()[0]; p[0] < box.end()[0]; ++p[0])
    for (p[1] = box.start()[1]; p[1] < box.end()[1]; ++p[1]) {
      const float* x = a.fdata + a.offset(p.data());
      const float v = s.fdata[s.offset(p.data())];
      float* o = yd + y.offset(p.data());
      if (mul)
        for (int64_t j = 0; j < hw; ++j) o[j] = x[j] * v;
      else
        for (int64_t j = 0; j < hw; ++j) o[j] = x[j] + v;
    }
  served.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace heddle::kdetail

namespace heddle::kernels {

int64_t channel_affine_calls() { return kdetail::served.load(std::memory_order_relaxed); }

}  // namespace heddle::kernels
