// Fast convolution and pooling kernels on local boxes, the way the field computes them: the box's
// input windows are unrolled into a column matrix (im2col, zero where a window leaves the tile:
// padding, or the far side of a halo) and multiplied with OpenBLAS sgemm; the input gradient
// multiplies first and folds the columns back (col2im), the weight gradient multiplies the output
// gradient with the unrolled input. Any sub-box works, including splits of the reduce dims, the
// kernel taps (weight gradient) and the groups. Pooling walks each window once per output point
// (forward) or once per output window touching the box (gradient), without allocations.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "KernelConvForm.h"
#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using namespace convform;

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// Unrolls the input windows of image (n, channel c0 + ci) for kernel taps kh x kw and output
// positions oh x ow into `col` rows ((ci, kh, kw) row-major) of oh.size() * ow.size() columns.
void im2col(const Tile4& X, const Geom& g, int64_t n, int64_t c0, Range ci, Range kh, Range kw,
            Range oh, Range ow, float* col) {
  const int64_t P = oh.size() * ow.size();
  float* row = col;
  for (int64_t c = ci.lo; c < ci.hi; ++c)
    for (int64_t i = kh.lo; i < kh.hi; ++i)
      for (int64_t j = kw.lo; j < kw.hi; ++j, row += P) {
        float* seg = row;
        for (int64_t y = oh.lo; y < oh.hi; ++y, seg += ow.size()) {
          int64_t h = y * g.s0 - g.p0 + i * g.d0;
          if (!X.in_h(h)) {
            std::fill(seg, seg + ow.size(), 0.0f);
            continue;
          }
          // Row h from the tile's first column; index by w - org (a pointer before the tile is UB).
          const float* xr = X.data + X.off(n, c0 + c, h, X.org[3]);
          int64_t w = ow.lo * g.s1 - g.p1 + j * g.d1;
          for (int64_t x = 0; x < ow.size(); ++x, w += g.s1)
            seg[x] = X.in_w(w) ? xr[w - X.org[3]] : 0.0f;
        }
      }
}

// conv2d over [n, (g), co, oh, ow, ci:sum]: Y[co, (oh, ow)] += W[co, (ci, kh, kw)] col.
bool conv_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs) {
  Dims d(op, {"n", "g", "co", "oh", "ow", "ci"}, "g");
  if (!d.ok || ins.size() != 2) return false;
  Tile4 X(*ins[0]), W(*ins[1]), Y(*outs[0]);
  const int64_t KH = op.inputs[1].proj.window()[2], KW = op.inputs[1].proj.window()[3];
  if (W.org[2] != 0 || W.org[3] != 0 || W.ext[2] != KH || W.ext[3] != KW) return false;
  const int64_t cig = op.space.dim(d.pos[5]).extent, cog = op.space.dim(d.pos[2]).extent;
  const int64_t n_ = d.pos[0], g_ = d.pos[1], co_ = d.pos[2], oh_ = d.pos[3], ow_ = d.pos[4],
                ci_ = d.pos[5];
  // Geometry from the input's projection (strides, padding), dilation from the attributes, and
  // every projection checked to be the form assumed below.
  Geom geo(op);
  const Operand &xo = op.inputs[0], &wo = op.inputs[1], &yo = op.results[0];
  geo.s0 = coef(xo, 2, oh_);
  geo.s1 = coef(xo, 3, ow_);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{n_, 1}}) || !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) ||
      !row_is(xo, 2, {{oh_, geo.s0}}, -geo.p0, geo.d0 * (KH - 1) + 1) ||
      !row_is(xo, 3, {{ow_, geo.s1}}, -geo.p1, geo.d1 * (KW - 1) + 1) ||
      !row_is(wo, 0, {{g_, cog}, {co_, 1}}) || !row_is(wo, 1, {{ci_, 1}}) ||
      !row_is(wo, 2, {}, 0, KH) || !row_is(wo, 3, {}, 0, KW) || !row_is(yo, 0, {{n_, 1}}) ||
      !row_is(yo, 1, {{g_, cog}, {co_, 1}}) || !row_is(yo, 2, {{oh_, 1}}) ||
      !row_is(yo, 3, {{ow_, 1}}))
    return false;
  Range rn = d.range(box, 0), rg = d.range(box, 1), co = d.range(box, 2), oh = d.range(box, 3),
        ow = d.range(box, 4), ci = d.range(box, 5);
  const int64_t K = ci.size() * KH * KW, P = oh.size() * ow.size();
  std::vector<float> col(static_cast<size_t>(K * P)), out(static_cast<size_t>(co.size() * P));
  for (int64_t n = rn.lo; n < rn.hi; ++n)
    for (int64_t g = rg.lo; g < rg.hi; ++g) {
      im2col(X, geo, n, g * cig, ci, {0, KH}, {0, KW}, oh, ow, col.data());
      sgemm(false, false, co.size(), P, K, W.data + W.off(g * cog + co.lo, ci.lo, 0, 0), W.st[0],
            col.data(), P, 0.0f, out.data(), P);
      const float* src = out.data();
      for (int64_t c = co.lo; c < co.hi; ++c)
        for (int64_t y = oh.lo; y < oh.hi; ++y, src += ow.size()) {
          float* yr = Y.data + Y.off(n, g * cog + c, y, ow.lo);
          for (int64_t x = 0; x < ow.size(); ++x) yr[x] += src[x];
        }
    }
  return true;
}

// conv2d_grad_input over [n, (g), ci, ih, iw, co:sum]: dcol = W^T dY over the output rows that
// reach the box, folded back into the box's input positions.
bool conv_grad_input(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs) {
  Dims d(op, {"n", "g", "ci", "ih", "iw", "co"}, "g");
  if (!d.ok) return false;
  Tile4 DY(*ins[0]), W(*ins[1]), DX(*outs[0]);
  Geom geo(op);
  const IVec &yw = op.inputs[0].proj.window(), &ww = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], KH = ww[2], KW = ww[3];
  if (W.org[2] != 0 || W.org[3] != 0 || W.ext[2] != KH || W.ext[3] != KW || DY.org[2] != 0 ||
      DY.org[3] != 0 || DY.ext[2] != OH || DY.ext[3] != OW)
    return false;
  const int64_t cig = op.space.dim(d.pos[2]).extent, cog = op.space.dim(d.pos[5]).extent;
  {
    const int64_t n_ = d.pos[0], g_ = d.pos[1], ci_ = d.pos[2], ih_ = d.pos[3], iw_ = d.pos[4],
                  co_ = d.pos[5];
    const Operand &yo = op.inputs[0], &wo = op.inputs[1], &xo = op.results[0];
    if (!row_is(yo, 0, {{n_, 1}}) || !row_is(yo, 1, {{g_, cog}, {co_, 1}}) ||
        !row_is(yo, 2, {}, 0, OH) || !row_is(yo, 3, {}, 0, OW) ||
        !row_is(wo, 0, {{g_, cog}, {co_, 1}}) || !row_is(wo, 1, {{ci_, 1}}) ||
        !row_is(wo, 2, {}, 0, KH) || !row_is(wo, 3, {}, 0, KW) || !row_is(xo, 0, {{n_, 1}}) ||
        !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) || !row_is(xo, 2, {{ih_, 1}}) ||
        !row_is(xo, 3, {{iw_, 1}}))
      return false;
  }
  Range rn = d.range(box, 0), rg = d.range(box, 1), ci = d.range(box, 2), ih = d.range(box, 3),
        iw = d.range(box, 4), co = d.range(box, 5);
  // Output rows whose windows reach input rows [ih.lo, ih.hi).
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  int64_t lo = std::max<int64_t>(0, ceil_div(ih.lo + geo.p0 - (KH - 1) * geo.d0, geo.s0));
  int64_t hi = std::min(OH, (ih.hi - 1 + geo.p0) / geo.s0 + 1);
  if (lo >= hi) return true;
  const int64_t M = ci.size() * KH * KW, P = (hi - lo) * OW;
  std::vector<float> dcol(static_cast<size_t>(M * P));
  for (int64_t n = rn.lo; n < rn.hi; ++n)
    for (int64_t g = rg.lo; g < rg.hi; ++g) {
      sgemm(true, false, M, P, co.size(), W.data + W.off(g * cog + co.lo, ci.lo, 0, 0), W.st[0],
            DY.data + DY.off(n, g * cog + co.lo, lo, 0), DY.st[1], 0.0f, dcol.data(), P);
      const float* row = dcol.data();
      for (int64_t c = ci.lo; c < ci.hi; ++c) {
        float* dx = DX.data + DX.off(n, g * cig + c, 0, 0);
        for (int64_t i = 0; i < KH; ++i)
          for (int64_t j = 0; j < KW; ++j, row += P)
            for (int64_t y = lo; y < hi; ++y) {
              int64_t h = y * geo.s0 - geo.p0 + i * geo.d0;
              if (h < ih.lo || h >= ih.hi) continue;
              const float* src = row + (y - lo) * OW;
              float* dr = dx + h * DX.st[2];
              int64_t w = -geo.p1 + j * geo.d1;
              for (int64_t x = 0; x < OW; ++x, w += geo.s1)
                if (w >= iw.lo && w < iw.hi) dr[w] += src[x];
            }
      }
    }
  return true;
}

// conv2d_grad_weight over [(g), co, ci, kh, kw, n:sum, oh:sum, ow:sum]:
// dW[co, (ci, kh, kw)] += dY[co, (oh, ow)] col^T, summed over the box's images.
bool conv_grad_weight(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                      const std::vector<Tensor*>& outs) {
  Dims d(op, {"g", "co", "ci", "kh", "kw", "n", "oh", "ow"}, "g");
  if (!d.ok) return false;
  Tile4 X(*ins[0]), DY(*ins[1]), DW(*outs[0]);
  const int64_t cig = op.space.dim(d.pos[2]).extent, cog = op.space.dim(d.pos[1]).extent;
  const int64_t g_ = d.pos[0], co_ = d.pos[1], ci_ = d.pos[2], kh_ = d.pos[3], kw_ = d.pos[4],
                n_ = d.pos[5], oh_ = d.pos[6], ow_ = d.pos[7];
  const Operand &xo = op.inputs[0], &yo = op.inputs[1], &wo = op.results[0];
  Geom geo(op);  // all from the input's projection
  geo.s0 = coef(xo, 2, oh_);
  geo.s1 = coef(xo, 3, ow_);
  geo.d0 = coef(xo, 2, kh_);
  geo.d1 = coef(xo, 3, kw_);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{n_, 1}}) || !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) ||
      !row_is(xo, 2, {{oh_, geo.s0}, {kh_, geo.d0}}, -geo.p0) ||
      !row_is(xo, 3, {{ow_, geo.s1}, {kw_, geo.d1}}, -geo.p1) || !row_is(yo, 0, {{n_, 1}}) ||
      !row_is(yo, 1, {{g_, cog}, {co_, 1}}) || !row_is(yo, 2, {{oh_, 1}}) ||
      !row_is(yo, 3, {{ow_, 1}}) || !row_is(wo, 0, {{g_, cog}, {co_, 1}}) ||
      !row_is(wo, 1, {{ci_, 1}}) || !row_is(wo, 2, {{kh_, 1}}) || !row_is(wo, 3, {{kw_, 1}}))
    return false;
  Range rg = d.range(box, 0), co = d.range(box, 1), ci = d.range(box, 2), kh = d.range(box, 3),
        kw = d.range(box, 4), rn = d.range(box, 5), oh = d.range(box, 6), ow = d.range(box, 7);
  const int64_t K = ci.size() * kh.size() * kw.size(), P = oh.size() * ow.size();
  std::vector<float> col(static_cast<size_t>(K * P)), dy(static_cast<size_t>(co.size() * P)),
      acc(static_cast<size_t>(co.size() * K));
  for (int64_t g = rg.lo; g < rg.hi; ++g) {
    for (int64_t n = rn.lo; n < rn.hi; ++n) {
      im2col(X, geo, n, g * cig, ci, kh, kw, oh, ow, col.data());
      float* dst = dy.data();
      for (int64_t c = co.lo; c < co.hi; ++c)
        for (int64_t y = oh.lo; y < oh.hi; ++y, dst += ow.size()) {
          const float* src = DY.data + DY.off(n, g * cog + c, y, ow.lo);
          std::copy(src, src + ow.size(), dst);
        }
      sgemm(false, true, co.size(), K, P, dy.data(), P, col.data(), P, n == rn.lo ? 0.0f : 1.0f,
            acc.data(), K);
    }
    const float* src = acc.data();
    for (int64_t c = co.lo; c < co.hi; ++c)
      for (int64_t i = ci.lo; i < ci.hi; ++i)
        for (int64_t y = kh.lo; y < kh.hi; ++y, src += kw.size()) {
          float* dr = DW.data + DW.off(g * cog + c, i, y, kw.lo);
          for (int64_t x = 0; x < kw.size(); ++x) dr[x] += src[x];
        }
  }
  return true;
}

// max/avg pooling over [n, c, oh, ow]: each window once, skipping elements outside the tile
// (padding; the average still divides by the whole window).
bool pool_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs) {
  if (box.rank() != 4) return false;
  Tile4 X(*ins[0]), Y(*outs[0]);
  const bool mx = op.kind == OpKind::kMaxPool2d;
  // Window, strides and padding from the input's projection, as the direct loop reads them.
  const Operand &xo = op.inputs[0], &yo = op.results[0];
  const int64_t k[2] = {xo.proj.window()[2], xo.proj.window()[3]};
  Geom geo(op);
  geo.s0 = coef(xo, 2, 2);
  geo.s1 = coef(xo, 3, 3);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{0, 1}}) || !row_is(xo, 1, {{1, 1}}) ||
      !row_is(xo, 2, {{2, geo.s0}}, -geo.p0, k[0]) || !row_is(xo, 3, {{3, geo.s1}}, -geo.p1, k[1]))
    return false;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(yo, r, {{r, 1}})) return false;
  const double inv = 1.0 / static_cast<double>(k[0] * k[1]);
  for (int64_t n = box.start()[0]; n < box.end()[0]; ++n)
    for (int64_t c = box.start()[1]; c < box.end()[1]; ++c) {
      const float* xc = X.data + X.off(n, c, X.org[2], X.org[3]);
      for (int64_t y = box.start()[2]; y < box.end()[2]; ++y) {
        float* yr = Y.data + Y.off(n, c, y, box.start()[3]);  // column box.start()[3]
        for (int64_t x = box.start()[3]; x < box.end()[3]; ++x) {
          double acc = mx ? -INFINITY : 0.0;
          for (int64_t i = 0; i < k[0]; ++i) {
            int64_t h = y * geo.s0 - geo.p0 + i;
            if (!X.in_h(h)) continue;
            const float* xr = xc + (h - X.org[2]) * X.st[2];  // row h from column org[3]
            for (int64_t j = 0; j < k[1]; ++j) {
              int64_t w = x * geo.s1 - geo.p1 + j;
              if (!X.in_w(w)) continue;
              const double v = xr[w - X.org[3]];
              acc = mx ? std::max(acc, v) : acc + v;
            }
          }
          yr[x - box.start()[3]] = static_cast<float>(mx ? acc : acc * inv);
        }
      }
    }
  return true;
}

// pool2d_grad over [n, c, ih, iw]: every output window reaching the box sends its gradient to
// the box's inputs it covers (avg) or to its first maximum, if inside the box (max).
bool pool_grad(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs) {
  if (box.rank() != 4) return false;
  Tile4 DY(*ins[0]), X(*ins[1]), DX(*outs[0]);
  const IVec &yw = op.inputs[0].proj.window(), &xw = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], H = xw[2], Wd = xw[3];
  if (X.org[2] != 0 || X.org[3] != 0 || X.ext[2] != H || X.ext[3] != Wd || DY.org[2] != 0 ||
      DY.org[3] != 0 || DY.ext[2] != OH || DY.ext[3] != OW)
    return false;
  for (int64_t r = 0; r < 2; ++r)
    if (!row_is(op.inputs[0], r, {{r, 1}}) || !row_is(op.inputs[1], r, {{r, 1}})) return false;
  if (!row_is(op.inputs[0], 2, {}, 0, OH) || !row_is(op.inputs[0], 3, {}, 0, OW) ||
      !row_is(op.inputs[1], 2, {}, 0, H) || !row_is(op.inputs[1], 3, {}, 0, Wd))
    return false;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(op.results[0], r, {{r, 1}})) return false;
  const bool mx = attr_s(op, "mode") == "max";
  auto k = attr_ints(op, "kernel", {1, 1});
  if (k.size() != 2) return false;
  Geom geo(op);
  const double inv = 1.0 / static_cast<double>(k[0] * k[1]);
  Range ih{box.start()[2], box.end()[2]}, iw{box.start()[3], box.end()[3]};
  auto first = [](int64_t lo, int64_t pad, int64_t kk, int64_t s) {  // first window reaching lo
    int64_t a = lo + pad - kk + 1;
    return std::max<int64_t>(0, a >= 0 ? (a + s - 1) / s : 0);
  };
  int64_t y0 = first(ih.lo, geo.p0, k[0], geo.s0),
          y1 = std::min(OH, (ih.hi - 1 + geo.p0) / geo.s0 + 1);
  int64_t x0 = first(iw.lo, geo.p1, k[1], geo.s1),
          x1 = std::min(OW, (iw.hi - 1 + geo.p1) / geo.s1 + 1);
  std::vector<double> acc(static_cast<size_t>(ih.size() * iw.size()));
  for (int64_t n = box.start()[0]; n < box.end()[0]; ++n)
    for (int64_t c = box.start()[1]; c < box.end()[1]; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* dy = DY.data + DY.off(n, c, 0, 0);
      const float* xc = X.data + X.off(n, c, 0, 0);
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x) {
          const double g = dy[y * OW + x];
          int64_t h0 = y * geo.s0 - geo.p0, w0 = x * geo.s1 - geo.p1;
          if (!mx) {
            for (int64_t h = std::max(h0, ih.lo); h < std::min(h0 + k[0], ih.hi); ++h)
              for (int64_t w = std::max(w0, iw.lo); w < std::min(w0 + k[1], iw.hi); ++w)
                acc[(h - ih.lo) * iw.size() + (w - iw.lo)] += g * inv;
            continue;
          }
          int64_t bh = -1, bw = -1;
          float best = -INFINITY;
          for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h0 + k[0], H); ++h)
            for (int64_t w = std::max<int64_t>(w0, 0); w < std::min(w0 + k[1], Wd); ++w)
              if (bh < 0 || xc[h * Wd + w] > best) {
                best = xc[h * Wd + w];
                bh = h;
                bw = w;
              }
          if (bh >= ih.lo && bh < ih.hi && bw >= iw.lo && bw < iw.hi)
            acc[(bh - ih.lo) * iw.size() + (bw - iw.lo)] += g;
        }
      for (int64_t h = ih.lo; h < ih.hi; ++h) {
        float* dr = DX.data + DX.off(n, c, h, iw.lo);
        for (int64_t w = 0; w < iw.size(); ++w)
          dr[w] += static_cast<float>(acc[(h - ih.lo) * iw.size() + w]);
      }
    }
  return true;
}

bool all_float(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) {
  for (const Tensor* t : ins)
    if (t->is_int() || t->rank() != 4) return false;
  for (const Tensor* t : outs)
    if (t->is_int() || t->rank() != 4) return false;
  return true;
}

}  // namespace

bool run_conv_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs) {
  if (!all_float(ins, outs) || outs.size() != 1) return false;
  switch (op.kind) {
    case OpKind::kConv2d:
      return conv_forward(op, box, ins, outs);
    case OpKind::kConv2dGradInput:
      return conv_grad_input(op, box, ins, outs);
    case OpKind::kConv2dGradWeight:
      return conv_grad_weight(op, box, ins, outs);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      return pool_forward(op, box, ins, outs);
    case OpKind::kPool2dGrad:
      return pool_grad(op, box, ins, outs);
    default:
      return false;
  }
}

}  // namespace heddle::kdetail
