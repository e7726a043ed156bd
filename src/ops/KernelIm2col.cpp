// Fast convolution and pooling kernels on local boxes, the way the field computes them: the box's
// input windows are unrolled into a column matrix (im2col, zero where a window leaves the tile:
// padding, or the far side of a halo) and multiplied with OpenBLAS sgemm; the input gradient
// multiplies first and folds the columns back (col2im), the weight gradient multiplies the output
// gradient with the unrolled input. Any sub-box works, including splits of the reduce dims, the
// kernel taps (weight gradient) and the groups. Pooling walks each window once per output point
// (forward) or once per output window touching the box (gradient), without allocations.

#include <algorithm>
#include <cmath>

#include "KernelConvForm.h"
#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using namespace convform;

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
  auto form = conv_forward_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, W, Y, geo, KH, KW, cig, cog, rn, rg, co, oh, ow, ci] = *form;
  const int64_t K = ci.size() * KH * KW, P = oh.size() * ow.size();
  std::vector<float> col(static_cast<size_t>(K * P)), out(static_cast<size_t>(co.size() * P));
  for (int64_t n = rn.lo; n < rn.hi; ++n)
    for (int64_t g = rg.lo; g < rg.hi; ++g) {
      im2col(X, geo, n, g * cig, ci, {0, KH}, {0, KW}, oh, ow, col.data());
      sgemm_blas(false, false, co.size(), P, K, W.data + W.off(g * cog + co.lo, ci.lo, 0, 0),
                 W.st[0], col.data(), P, 0.0f, out.data(), P);
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
  auto form = conv_grad_input_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [DY, W, DX, geo, OH, OW, KH, KW, H, Wd, cig, cog, rn, rg, ci, ih, iw, co] = *form;
  // Output rows whose windows reach input rows [ih.lo, ih.hi).
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  int64_t lo = std::max<int64_t>(0, ceil_div(ih.lo + geo.p0 - (KH - 1) * geo.d0, geo.s0));
  int64_t hi = std::min(OH, (ih.hi - 1 + geo.p0) / geo.s0 + 1);
  if (lo >= hi) return true;
  const int64_t M = ci.size() * KH * KW, P = (hi - lo) * OW;
  std::vector<float> dcol(static_cast<size_t>(M * P));
  for (int64_t n = rn.lo; n < rn.hi; ++n)
    for (int64_t g = rg.lo; g < rg.hi; ++g) {
      sgemm_blas(true, false, M, P, co.size(), W.data + W.off(g * cog + co.lo, ci.lo, 0, 0),
                 W.st[0], DY.data + DY.off(n, g * cog + co.lo, lo, 0), DY.st[1], 0.0f, dcol.data(),
                 P);
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
  auto form = conv_grad_weight_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, DY, DW, geo, KH, KW, cig, cog, rg, co, ci, kh, kw, rn, oh, ow] = *form;
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
      sgemm_blas(false, true, co.size(), K, P, dy.data(), P, col.data(), P,
                 n == rn.lo ? 0.0f : 1.0f, acc.data(), K);
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
  auto form = pool_forward_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, Y, geo, k, rn, rc, oh, ow] = *form;
  const bool mx = op.kind == OpKind::kMaxPool2d;
  const double inv = 1.0 / static_cast<double>(k[0] * k[1]);
  const int64_t n0 = box.start()[0], n1 = box.end()[0], c0 = box.start()[1], c1 = box.end()[1],
                y0 = box.start()[2], y1 = box.end()[2], x0 = box.start()[3], x1 = box.end()[3];
  // Per output column, the window's columns inside the tile: [jlo, jhi) of its k[1] taps.
  std::vector<int64_t> jlo(static_cast<size_t>(x1 - x0)), jhi(jlo.size());
  for (int64_t x = x0; x < x1; ++x) {
    const int64_t w0 = x * geo.s1 - geo.p1;
    jlo[x - x0] = std::clamp<int64_t>(X.org[3] - w0, 0, k[1]);
    jhi[x - x0] = std::clamp<int64_t>(X.org[3] + X.ext[3] - w0, 0, k[1]);
  }
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = c0; c < c1; ++c) {
      const float* xc = X.data + X.off(n, c, X.org[2], X.org[3]);
      for (int64_t y = y0; y < y1; ++y) {
        float* yr = Y.data + Y.off(n, c, y, x0);  // column x0
        const int64_t h0 = y * geo.s0 - geo.p0;
        const int64_t ilo = std::clamp<int64_t>(X.org[2] - h0, 0, k[0]),
                      ihi = std::clamp<int64_t>(X.org[2] + X.ext[2] - h0, 0, k[0]);
        for (int64_t x = x0; x < x1; ++x) {
          // Column w of row h at xc[(h - org[2]) * st[2] + w - org[3]].
          const int64_t base = (h0 - X.org[2]) * X.st[2] + (x * geo.s1 - geo.p1 - X.org[3]);
          const int64_t a = jlo[x - x0], b = jhi[x - x0];
          if (mx) {  // max is exact in float
            float acc = -INFINITY;
            for (int64_t i = ilo; i < ihi; ++i)
              for (int64_t j = a; j < b; ++j) acc = std::max(acc, xc[base + i * X.st[2] + j]);
            yr[x - x0] = acc;
            continue;
          }
          double acc = 0.0;
          for (int64_t i = ilo; i < ihi; ++i)
            for (int64_t j = a; j < b; ++j) acc += xc[base + i * X.st[2] + j];
          yr[x - x0] = static_cast<float>(acc * inv);
        }
      }
    }
  return true;
}

// pool2d_grad over [n, c, ih, iw]: every output window reaching the box sends its gradient to
// the box's inputs it covers (avg) or to its first maximum, if inside the box (max).
bool pool_grad(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs) {
  auto form = pool_grad_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [DY, X, DX, geo, OH, OW, H, Wd, mx, k, rn, rc, ih, iw] = *form;
  const double inv = 1.0 / static_cast<double>(k[0] * k[1]);
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
          // The first largest tap, without branches on the values (they would mispredict).
          int64_t bh = -1, bw = -1;
          float best = -INFINITY;
          const int64_t he = std::min(h0 + k[0], H), ws = std::max<int64_t>(w0, 0),
                        we = std::min(w0 + k[1], Wd);
          for (int64_t h = std::max<int64_t>(h0, 0); h < he; ++h)
            for (int64_t w = ws; w < we; ++w) {
              const float v = xc[h * Wd + w];
              const bool take = bh < 0 || v > best;
              best = take ? v : best;
              bh = take ? h : bh;
              bw = take ? w : bw;
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
