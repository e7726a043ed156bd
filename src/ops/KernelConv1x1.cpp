// Unstrided, unpadded 1x1 convolutions of one group as matrix products on the NCHW tiles in
// place, the way PyTorch runs them on CPU: per image the forward is Y_n = W X_n ([co x ci] times
// [ci x H*W]), the input gradient dX_n = W^T dY_n, and the weight gradient sums dY_n X_n^T over
// the images in order. No im2col (a 1x1 window reads each input once) and no reorders into
// oneDNN's blocked layouts, which cost DenseNet-121's 61 such convolutions more than oneDNN's
// 1x1 kernels saved (docs/benchmarks.md). On one thread the products are OpenBLAS's; on more,
// the images (or the weight gradient's rows) are split over the device's threads, each product
// oneDNN's sgemm on one thread (OpenBLAS's own pool would serialize concurrent callers). Every
// element is computed by the same product whichever thread runs it, so results repeat bitwise.

#include <algorithm>
#include <atomic>
#include <cmath>

#include "KernelConvForm.h"
#include "heddle/support/Assert.h"
#include "heddle/support/ThreadPool.h"

namespace heddle::kdetail {

namespace {

using namespace convform;

std::atomic<int64_t> served{0};

// Row-major C = A B (+ C when beta is 1). One thread: OpenBLAS (faster than oneDNN's sgemm on
// these shapes); inside the device's threads: oneDNN's on the calling thread.
void sgemm(bool threaded, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (threaded)
    sgemm1(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  else
    sgemm_blas(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

// True when rows `h` of tile `t` over all of the box's columns `w` are one contiguous run per
// channel: the box spans the tile's width and the tile's rows follow each other.
bool plane_rows(const Tile4& t, Range h, Range w) {
  return t.st[3] == 1 && w.lo == t.org[3] && w.size() == t.ext[3] &&
         (h.size() == 1 || t.st[2] == t.ext[3]) && t.st[1] >= h.size() * w.size();
}

// Weights [co, ci, 1, 1] as a row-major matrix of leading dim st[0].
bool matrix_weights(const Tile4& w) { return w.st[1] == 1; }

// True when `op` is a convolution of one group with 1x1 taps, unit strides and no padding (its
// attributes; the forms check the projections).
bool plain_1x1(const Op& op, int64_t taps_h, int64_t taps_w) {
  if (taps_h != 1 || taps_w != 1) return false;
  const int64_t g = op.space.find("g");
  if (g >= 0 && op.space.dim(g).extent != 1) return false;
  const Geom geo(op);
  return geo.s0 == 1 && geo.s1 == 1 && geo.p0 == 0 && geo.p1 == 0;
}

// The number of pieces a loop of `len` items of `work` multiply-adds each is split into.
int64_t pieces(const KernelOptions& o, int64_t len, int64_t work) {
  if (o.threads <= 1 || len <= 1 || len * work < 64 * std::max<int64_t>(o.grain, 1)) return 1;
  return std::min<int64_t>(o.threads, len);
}

bool forward(const Op& op, const Box& box, const Ins& ins, const Outs& outs, const KernelOptions& o,
             const std::vector<PostOp>* ep) {
  // Forward-only runs: oneDNN's 1x1 kernels with the reordered weights it keeps (from the second
  // call on) cost less than the products; from the first call, so that no step pays for oneDNN's
  // primitives mid-run.
  if (o.feeds_repeat || ((o.unchanged_inputs >> 1) & 1u)) return false;
  auto form = conv_forward_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, W, Y, geo, KH, KW, cig, cog, rn, rg, co, oh, ow, ci] = *form;
  if (!plain_1x1(op, KH, KW) || rg.size() != 1 || !matrix_weights(W) || !plane_rows(X, oh, ow) ||
      !plane_rows(Y, oh, ow))
    return false;
  if (ep) {
    if (o.accumulate) return false;
    for (const PostOp& e : *ep)
      if (!e.channel.empty() && static_cast<int64_t>(e.channel.size()) != co.size()) return false;
  }
  const int64_t P = oh.size() * ow.size();
  const float* w = W.data + W.off(co.lo, ci.lo, 0, 0);
  const int64_t parts = pieces(o, rn.size(), co.size() * ci.size() * P);
  parallel_for(static_cast<int>(parts), rn.size(), [&](int64_t i) {
    const int64_t n = rn.lo + i;
    float* y = Y.data + Y.off(n, co.lo, oh.lo, ow.lo);
    sgemm(parts > 1, false, false, co.size(), P, ci.size(), w, W.st[0],
          X.data + X.off(n, ci.lo, oh.lo, ow.lo), X.st[1], o.accumulate ? 1.0f : 0.0f, y, Y.st[1]);
    if (ep)
      for (int64_t c = 0; c < co.size(); ++c) apply_epilogue(*ep, c, y + c * Y.st[1], P);
  });
  return true;
}

bool grad_input(const Op& op, const Box& box, const Ins& ins, const Outs& outs,
                const KernelOptions& o) {
  auto form = conv_grad_input_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [DY, W, DX, geo, OH, OW, KH, KW, H, Wd, cig, cog, rn, rg, ci, ih, iw, co] = *form;
  if (!plain_1x1(op, KH, KW) || OH != H || OW != Wd || rg.size() != 1 || !matrix_weights(W) ||
      !plane_rows(DX, ih, iw) || !plane_rows(DY, ih, iw))
    return false;
  const int64_t P = ih.size() * iw.size();
  const float* w = W.data + W.off(co.lo, ci.lo, 0, 0);
  const int64_t parts = pieces(o, rn.size(), co.size() * ci.size() * P);
  parallel_for(static_cast<int>(parts), rn.size(), [&](int64_t i) {
    const int64_t n = rn.lo + i;
    sgemm(parts > 1, true, false, ci.size(), P, co.size(), w, W.st[0],
          DY.data + DY.off(n, co.lo, ih.lo, iw.lo), DY.st[1], o.accumulate ? 1.0f : 0.0f,
          DX.data + DX.off(n, ci.lo, ih.lo, iw.lo), DX.st[1]);
  });
  return true;
}

bool grad_weight(const Op& op, const Box& box, const Ins& ins, const Outs& outs,
                 const KernelOptions& o) {
  auto form = conv_grad_weight_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, DY, DW, geo, KH, KW, cig, cog, rg, co, ci, kh, kw, rn, oh, ow] = *form;
  if (!plain_1x1(op, KH, KW) || rg.size() != 1 || !matrix_weights(DW) || !plane_rows(X, oh, ow) ||
      !plane_rows(DY, oh, ow))
    return false;
  const int64_t P = oh.size() * ow.size();
  // Rows of dW in blocks of 8 per thread; each block sums its images in order.
  const int64_t parts = pieces(o, (co.size() + 7) / 8, 8 * ci.size() * P * rn.size());
  parallel_for(static_cast<int>(parts), parts, [&](int64_t i) {
    const int64_t lo = co.size() * i / parts / 8 * 8,
                  hi = i + 1 == parts ? co.size() : co.size() * (i + 1) / parts / 8 * 8;
    if (hi <= lo) return;
    float* dw = DW.data + DW.off(co.lo + lo, ci.lo, 0, 0);
    for (int64_t n = rn.lo; n < rn.hi; ++n)
      sgemm(parts > 1, false, true, hi - lo, ci.size(), P,
            DY.data + DY.off(n, co.lo + lo, oh.lo, ow.lo), DY.st[1],
            X.data + X.off(n, ci.lo, oh.lo, ow.lo), X.st[1],
            n > rn.lo || o.accumulate ? 1.0f : 0.0f, dw, DW.st[0]);
  });
  return true;
}

}  // namespace

void apply_epilogue(const std::vector<PostOp>& ep, int64_t c, float* y, int64_t n) {
  for (const PostOp& e : ep) {
    const float v = e.channel.empty() ? 0.0f : e.channel[static_cast<size_t>(c)];
    switch (e.kind) {
      case PostOp::kAdd:
        for (int64_t j = 0; j < n; ++j) y[j] += v;
        break;
      case PostOp::kMul:
        for (int64_t j = 0; j < n; ++j) y[j] *= v;
        break;
      case PostOp::kMax:
        for (int64_t j = 0; j < n; ++j) y[j] = std::max(y[j], v);
        break;
      case PostOp::kMin:
        for (int64_t j = 0; j < n; ++j) y[j] = std::min(y[j], v);
        break;
      case PostOp::kRelu:
        for (int64_t j = 0; j < n; ++j) y[j] = std::max(y[j], 0.0f);
        break;
      case PostOp::kSigmoid:
        for (int64_t j = 0; j < n; ++j) y[j] = 1.0f / (1.0f + std::exp(-y[j]));
        break;
      case PostOp::kSwish:
        for (int64_t j = 0; j < n; ++j) y[j] = y[j] / (1.0f + std::exp(-y[j]));
        break;
    }
  }
}

bool run_conv1x1(const Op& op, const Box& box, const Ins& ins, const Outs& outs,
                 const KernelOptions& o, const std::vector<PostOp>* ep) {
  if (o.reference || o.direct_conv || outs.size() != 1 || outs[0]->rank() != 4 || outs[0]->is_int())
    return false;
  for (const Tensor* t : ins)
    if (t->is_int() || t->rank() != 4) return false;
  const bool ok = op.kind == OpKind::kConv2d             ? forward(op, box, ins, outs, o, ep)
                  : ep                                   ? false
                  : op.kind == OpKind::kConv2dGradInput  ? grad_input(op, box, ins, outs, o)
                  : op.kind == OpKind::kConv2dGradWeight ? grad_weight(op, box, ins, outs, o)
                                                         : false;
  if (ok) served.fetch_add(1, std::memory_order_relaxed);
  return ok;
}

}  // namespace heddle::kdetail

namespace heddle::kernels {

int64_t conv1x1_calls() { return kdetail::served.load(std::memory_order_relaxed); }

}  // namespace heddle::kernels
