// The weight gradient of a depthwise convolution (one input and one output channel per group) as
// direct loops over the plain NCHW tiles: for each channel and tap, the products of the output
// gradient's rows with the input rows the tap reads, summed in lanes of kLanes (a vector
// register; rows shorter than that in one sum) and the lanes then in order, so the result does not
// depend on the thread count. oneDNN 2.6 runs this problem on small planes (MobileNetV2's 960
// channels on 2x2 maps) through its im2col + gemm path, 30x slower than these loops; KernelDnnl.cpp
// calls them there.
#include "KernelConvForm.h"

namespace heddle::kdetail {

namespace {

using namespace convform;

constexpr int64_t kLanes = 16;

// sum over j < m of a[j] * b[j * sb], in lanes.
float dot(const float* a, const float* b, int64_t sb, int64_t m) {
  if (m < kLanes) {  // small planes: one sum
    float s = 0.0f;
    for (int64_t j = 0; j < m; ++j) s += a[j] * b[j * sb];
    return s;
  }
  float lane[kLanes] = {};
  int64_t j = 0;
  if (sb == 1) {
    for (; j + kLanes <= m; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lane[l] += a[j + l] * b[j + l];
  } else {
    for (; j + kLanes <= m; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lane[l] += a[j + l] * b[(j + l) * sb];
  }
  for (int64_t l = 0; j < m; ++j, ++l) lane[l] += a[j] * b[j * sb];
  float s = 0.0f;
  for (float v : lane) s += v;
  return s;
}

}  // namespace

bool run_depthwise_grad_weight(const Op& op, const Box& box, const Ins& ins, const Outs& outs,
                               const KernelOptions& o) {
  auto form = conv_grad_weight_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, DY, DW, geo, KH, KW, cig, cog, rg, co, ci, kh, kw, rn, oh, ow] = *form;
  if (cig != 1 || cog != 1 || geo.d0 < 1 || geo.d1 < 1 || DY.st[3] != 1) return false;
  if (kh.lo != 0 || kh.hi != KH || kw.lo != 0 || kw.hi != KW) return false;
  for (int64_t g = rg.lo; g < rg.hi; ++g)
    for (int64_t a = 0; a < KH; ++a)
      for (int64_t b = 0; b < KW; ++b) {
        // The outputs whose tap (a, b) reads a column of the tile: ow in [w0, w1).
        const int64_t off_w = b * geo.d1 - geo.p1, x_lo = X.org[3], x_hi = X.org[3] + X.ext[3];
        auto ceil_div = [](int64_t p, int64_t q) { return p >= 0 ? (p + q - 1) / q : -(-p / q); };
        const int64_t w0 = std::max(ow.lo, ceil_div(x_lo - off_w, geo.s1)),
                      w1 = std::min(ow.hi, ceil_div(x_hi - off_w, geo.s1));
        float sum = 0.0f;
        for (int64_t n = rn.lo; n < rn.hi && w0 < w1; ++n)
          for (int64_t r = oh.lo; r < oh.hi; ++r) {
            const int64_t ih = r * geo.s0 - geo.p0 + a * geo.d0;
            if (!X.in_h(ih)) continue;
            sum += dot(DY.data + DY.off(n, g, r, w0), X.data + X.off(n, g, ih, w0 * geo.s1 + off_w),
                       geo.s1 * X.st[3], w1 - w0);
          }
        float& d = DW.data[DW.off(g, 0, a, b)];
        d = o.accumulate ? d + sum : sum;
      }
  return true;
}

}  // namespace heddle::kdetail
