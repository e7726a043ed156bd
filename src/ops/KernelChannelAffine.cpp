// A CNN's per-channel affine ops on NCHW planes: a mul or add of a value per channel (batch norm's
// scale and shift, a convolution's bias) and the mul's gradient with respect to the other operand
// (dy times the scale), one plane at a time. The fused-chain loop walks such an op row by row, and
// a per-channel operand stops its rows from merging across channels, so DenseNet-121's late planes
// (4x4, 2x2) became rows of 16 and 4 elements whose per-row cost outweighed the arithmetic. The
// same float operation per element as the chain loop, so the results are bitwise the same.
#include <atomic>
#include <optional>

#include "KernelConvForm.h"
#include "KernelPointwiseFast.h"

namespace heddle::kdetail {

namespace {

std::atomic<int64_t> served{0}, reduced{0};

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

namespace {

// One per-channel op of a chain, resolved: its plane operand (x, or dy), its per-channel one and
// whether it multiplies.
struct AffineStep {
  Access plane, chan;
  bool mul = false;
};

// `op` as a per-channel affine step whose plane operand is `a` when given (the result of the op
// before it in the chain; null: its own input tile), or nothing.
std::optional<AffineStep> affine_step(const Op& op, const Box& box,
                                      const std::function<const Tensor*(ValueId)>& tile_of,
                                      std::optional<ValueId> from) {
  if (op.results.size() != 1 || op.space.has_reduce()) return std::nullopt;
  // The plane operand and the per-channel one, by kind: mul/add (x, s) either way round;
  // elementwise_grad of mul w.r.t. operand k: dy times the other operand.
  bool mul = op.kind == OpKind::kMul;
  int plane = -1, chan = -1;
  if ((op.kind == OpKind::kMul || op.kind == OpKind::kAdd) && op.inputs.size() == 2) {
    plane = 0;
    chan = 1;
    if (from && op.inputs[1].value == *from) std::swap(plane, chan);
  } else if (!from && op.kind == OpKind::kElementwiseGrad && op.inputs.size() == 3 &&
             attr_s(op, "fn") == "mul") {
    mul = true;
    plane = 0;
    chan = attr_i(op, "wrt", 0) == 0 ? 2 : 1;
  } else {
    return std::nullopt;
  }
  if (from && op.inputs[plane].value != *from) return std::nullopt;
  const int64_t h = box.end()[2] - box.start()[2], w = box.end()[3] - box.start()[3];
  auto access = [&](int k) { return Access(*tile_of(op.inputs[k].value), op.inputs[k]); };
  Access s = access(chan);
  if (!channel_access(s, box)) {
    if (from || op.kind == OpKind::kElementwiseGrad) return std::nullopt;
    std::swap(plane, chan);  // (s, x)
    s = access(chan);
    if (!channel_access(s, box)) return std::nullopt;
  }
  if (from) return AffineStep{s, s, mul};  // its plane operand is the previous step's result
  Access a = access(plane);
  if (!plane_access(a, h, w)) return std::nullopt;
  return AffineStep{a, s, mul};
}

}  // namespace

bool run_channel_affine(const std::vector<const Op*>& ops, const Box& box,
                        const std::function<const Tensor*(ValueId)>& tile_of,
                        const std::vector<Tensor*>& outs) {
  if (box.rank() != 4 || box.empty() || ops.empty() || ops.size() > 2 || !outs.back()) return false;
  const int64_t h = box.end()[2] - box.start()[2], w = box.end()[3] - box.start()[3];
  std::vector<AffineStep> steps;
  std::vector<std::optional<Access>> ys;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::optional<ValueId> from;
    if (i > 0) from = ops[i - 1]->results[0].value;
    auto st = affine_step(*ops[i], box, tile_of, from);
    if (!st) return false;
    steps.push_back(*st);
    if (outs[i] && outs[i]->is_int()) return false;
    ys.emplace_back();
    if (outs[i]) {
      ys.back().emplace(*outs[i], ops[i]->results[0]);
      if (!plane_access(*ys.back(), h, w)) return false;
    }
  }
  // A pair: t = x op0 s0, then y = t op1 s1, both rounded to float as the chain loop does. Per
  // image, each operand's planes are found from the first channel's by its channel stride (late
  // DenseNet planes hold 4 or 16 elements: per-plane offsets would cost more than the planes).
  const int64_t hw = h * w, c0 = box.start()[1], c1 = box.end()[1];
  const bool pair = steps.size() == 2, m0 = steps[0].mul, m1 = pair && steps[1].mul;
  const Access &x = steps[0].plane, &s0 = steps[0].chan;
  std::vector<int64_t> p(box.start().values());
  for (p[0] = box.start()[0]; p[0] < box.end()[0]; ++p[0]) {
    p[1] = c0;
    const float* xp = x.fdata + x.offset(p.data());
    const float* v0 = s0.fdata + s0.offset(p.data());
    const float* v1 = pair ? steps[1].chan.fdata + steps[1].chan.offset(p.data()) : nullptr;
    float* o0 = ys[0] ? outs[0]->f32() + ys[0]->offset(p.data()) : nullptr;
    float* o1 = pair ? outs[1]->f32() + ys[1]->offset(p.data()) : nullptr;
    for (int64_t c = 0; c < c1 - c0; ++c) {
      const float* xc = xp + c * x.coef[1];
      const float a = v0[c * s0.coef[1]];
      float* y0 = o0 ? o0 + c * ys[0]->coef[1] : nullptr;
      if (!pair) {
        if (m0)
          for (int64_t j = 0; j < hw; ++j) y0[j] = xc[j] * a;
        else
          for (int64_t j = 0; j < hw; ++j) y0[j] = xc[j] + a;
        continue;
      }
      const float b = v1[c * steps[1].chan.coef[1]];
      float* y1 = o1 + c * ys[1]->coef[1];
      if (y0 && m0 && !m1) {  // batch norm's scale and shift, both kept
        for (int64_t j = 0; j < hw; ++j) {
          const float t = xc[j] * a;
          y0[j] = t;
          y1[j] = t + b;
        }
      } else if (m0 && !m1) {
        for (int64_t j = 0; j < hw; ++j) y1[j] = xc[j] * a + b;
      } else {
        for (int64_t j = 0; j < hw; ++j) {
          const float t = m0 ? xc[j] * a : xc[j] + a;
          if (y0) y0[j] = t;
          y1[j] = m1 ? t * b : t + b;
        }
      }
    }
  }
  served.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool run_channel_reduce(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                        const std::vector<Tensor*>& outs, Store mode) {
  if (mode != Store::kSum || box.rank() != 4 || box.empty() || outs.size() != 1 ||
      outs[0]->is_int() || op.space.rank() != 4)
    return false;
  for (int64_t d = 0; d < 4; ++d)
    if (d == 1 ? op.space.dim(d).reduce.has_value() : op.space.dim(d).reduce != Monoid::kSum)
      return false;
  // The plane operands summed: x for reduce_sum, (dy, other factor) for mul's gradient.
  const bool sum = op.kind == OpKind::kReduceSum && ins.size() == 1;
  const bool grad =
      op.kind == OpKind::kElementwiseGrad && ins.size() == 3 && attr_s(op, "fn") == "mul";
  if (!sum && !grad) return false;
  const int first = 0, second = grad ? (attr_i(op, "wrt", 0) == 0 ? 2 : 1) : 0;
  for (int k : {first, second})
    if (ins[k]->is_int() || op.inputs[k].padded) return false;
  const int64_t h = box.end()[2] - box.start()[2], w = box.end()[3] - box.start()[3];
  Access a(*ins[first], op.inputs[first]), b(*ins[second], op.inputs[second]);
  Access y(*outs[0], op.results[0]);
  if (!plane_access(a, h, w) || !plane_access(b, h, w) || !channel_access(y, box)) return false;
  const int64_t hw = h * w;
  std::vector<int64_t> p(box.start().values());
  auto one = [](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0]; };
  auto product = [](const float* in, float* out, const int64_t*, int64_t) {
    out[0] = in[0] * in[1];
  };
  for (p[1] = box.start()[1]; p[1] < box.end()[1]; ++p[1]) {
    p[0] = box.start()[0];
    float* d = outs[0]->f32() + y.offset(p.data());
    const float* pa = a.fdata + a.offset(p.data());
    const float* pb = b.fdata + b.offset(p.data());
    for (int64_t n = 0; n < box.end()[0] - box.start()[0]; ++n) {
      const float* ra = pa + n * a.coef[0];
      const float* rb = pb + n * b.coef[0];
      if (second == first)
        unit_row_as<Store::kSum, 1, 1>(ra, ra, d, hw, p.data(), one, true);
      else
        unit_row_as<Store::kSum, 1, 1>(ra, rb, d, hw, p.data(), product, true);
    }
  }
  reduced.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace heddle::kdetail

namespace heddle::kernels {

int64_t channel_affine_calls() { return kdetail::served.load(std::memory_order_relaxed); }

int64_t channel_reduce_calls() { return kdetail::reduced.load(std::memory_order_relaxed); }

}  // namespace heddle::kernels
