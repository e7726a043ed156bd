// Convolution and pooling kernels, forward and backward: dispatch to the im2col + sgemm kernels
// (KernelIm2col.cpp), and the direct loops they are tested and benchmarked against. Each index
// point of a direct loop reads its windows through the projections (padded reads outside the tile
// are zero, or skipped for max pooling), so any sub-box, including a split of the channel
// reduction, computes its share.
#include <array>
#include <cmath>

#include "KernelConvForm.h"
#include "KernelUtil.h"
#include "heddle/ir/WindowGeometry.h"

namespace heddle::kdetail {

namespace {

// The op's geometry with the defaults every reader uses (window_geometry()).
struct Geometry {
  std::array<int64_t, 2> stride = {1, 1}, dil = {1, 1};
  std::array<int64_t, 4> pad = {0, 0, 0, 0};
  explicit Geometry(const Op& op) {
    auto g = window_geometry(op.kind, op.attrs);
    if (!g.ok()) return;  // the verifier refuses such attributes
    stride = g->stride;
    pad = g->padding;
    dil = g->dilation;
  }
};

int64_t reduce_dim(const Op& op) {
  for (int64_t k = 0; k < op.space.rank(); ++k)
    if (op.space.dim(k).reduce) return k;
  return -1;
}

Status conv_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                    const std::vector<Tensor*>& outs) {
  Geometry g(op);
  Access X(*ins[0], op.inputs[0]), W(*ins[1], op.inputs[1]), Y(*outs[0], op.results[0]);
  const IVec &xw = op.inputs[0].proj.window(), &ww = op.inputs[1].proj.window();
  int64_t KH = ww[2], KW = ww[3];
  std::vector<int64_t> xtap, wtap;
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      xtap.push_back(g.dil[0] * kh * xw[3] + g.dil[1] * kw);
      wtap.push_back(kh * KW + kw);
    }
  HEDDLE_DEBUG_ASSERT(xtap.empty() || xtap.back() < X.window_size())
      << "conv2d window " << xw.to_string() << " < dilated kernel (verifier: the conv2d form)";
  int64_t ci = reduce_dim(op);
  bool bias = ins.size() > 2;
  std::optional<Access> Bv;
  if (bias) Bv.emplace(*ins[2], op.inputs[2]);
  for_each_point(box, [&](const int64_t* p) {
    int64_t xo = X.offset(p), wo = W.offset(p);
    double acc = 0;
    if (X.padded) {
      auto c = X.coords(p);
      for (size_t t = 0; t < xtap.size(); ++t)
        if (X.inside(c, xtap[t]))
          acc += static_cast<double>(X.load(xo + X.woff[xtap[t]])) * W.load(wo + W.woff[wtap[t]]);
    } else {
      for (size_t t = 0; t < xtap.size(); ++t)
        acc += static_cast<double>(X.load(xo + X.woff[xtap[t]])) * W.load(wo + W.woff[wtap[t]]);
    }
    if (bias && ci >= 0 && p[ci] == 0) acc += Bv->load(Bv->offset(p));
    outs[0]->f32()[Y.offset(p)] += static_cast<float>(acc);
  });
  return {};
}

Status pool_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                    const std::vector<Tensor*>& outs) {
  bool mx = op.kind == OpKind::kMaxPool2d;
  Access X(*ins[0], op.inputs[0]), Y(*outs[0], op.results[0]);
  auto n = static_cast<double>(X.window_size());
  std::vector<float> buf(static_cast<size_t>(X.window_size()));
  for_each_point(box, [&](const int64_t* p) {
    X.read(p, buf.data(), mx ? -INFINITY : 0.0f);
    double acc = mx ? -INFINITY : 0.0;
    for (float v : buf) acc = mx ? std::max(acc, static_cast<double>(v)) : acc + v;
    outs[0]->f32()[Y.offset(p)] = static_cast<float>(mx ? acc : acc / n);
  });
  return {};
}

Status conv_grad_input(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                       const std::vector<Tensor*>& outs) {
  // inputs: dy (n, co, 0, 0)[1, 1, OH, OW], w (co, ci, 0, 0)[1, 1, KH, KW]; out (n, ci, ih, iw).
  Geometry g(op);
  Access DY(*ins[0], op.inputs[0]), W(*ins[1], op.inputs[1]), DX(*outs[0], op.results[0]);
  const IVec &yw = op.inputs[0].proj.window(), &ww = op.inputs[1].proj.window();
  int64_t OH = yw[2], OW = yw[3], KH = ww[2], KW = ww[3];
  for_each_point(box, [&](const int64_t* p) {
    auto c = DX.coords(p);
    int64_t yo = DY.offset(p), wo = W.offset(p);
    double acc = 0;
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t th = c[2] + g.pad[0] - kh * g.dil[0];
      if (th < 0 || th % g.stride[0] || th / g.stride[0] >= OH) continue;
      for (int64_t kw = 0; kw < KW; ++kw) {
        int64_t tw = c[3] + g.pad[1] - kw * g.dil[1];
        if (tw < 0 || tw % g.stride[1] || tw / g.stride[1] >= OW) continue;
        acc +=
            static_cast<double>(DY.load(yo + DY.woff[(th / g.stride[0]) * OW + tw / g.stride[1]])) *
            W.load(wo + W.woff[kh * KW + kw]);
      }
    }
    outs[0]->f32()[DX.offset(p)] += static_cast<float>(acc);
  });
  return {};
}

Status pool_grad(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                 const std::vector<Tensor*>& outs) {
  // inputs: dy (n, c, 0, 0)[1, 1, OH, OW], x (n, c, 0, 0)[1, 1, H, W]; out (n, c, ih, iw).
  Geometry g(op);
  bool mx = attr_s(op, "mode") == "max";
  auto k = attr_ints(op, "kernel", {1, 1});
  Access DY(*ins[0], op.inputs[0]), X(*ins[1], op.inputs[1]), DX(*outs[0], op.results[0]);
  const IVec &yw = op.inputs[0].proj.window(), &xw = op.inputs[1].proj.window();
  int64_t OH = yw[2], OW = yw[3], H = xw[2], Wd = xw[3];
  auto inv = static_cast<float>(1.0 / static_cast<double>(k[0] * k[1]));
  for_each_point(box, [&](const int64_t* p) {
    auto c = DX.coords(p);
    int64_t yo = DY.offset(p), xo = X.offset(p);
    double acc = 0;
    for (int64_t kh = 0; kh < k[0]; ++kh) {
      int64_t th = c[2] + g.pad[0] - kh;
      if (th < 0 || th % g.stride[0] || th / g.stride[0] >= OH) continue;
      int64_t oh = th / g.stride[0];
      for (int64_t kw = 0; kw < k[1]; ++kw) {
        int64_t tw = c[3] + g.pad[1] - kw;
        if (tw < 0 || tw % g.stride[1] || tw / g.stride[1] >= OW) continue;
        int64_t ow = tw / g.stride[1];
        float dy = DY.load(yo + DY.woff[oh * OW + ow]);
        if (!mx) {
          acc += dy * inv;
          continue;
        }
        // The first maximum of the window (row-major, padding excluded) takes the gradient.
        int64_t h0 = oh * g.stride[0] - g.pad[0], w0 = ow * g.stride[1] - g.pad[1];
        int64_t bh = -1, bw = -1;
        float best = -INFINITY;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t h = h0 + i, w = w0 + j;
            if (h < 0 || h >= H || w < 0 || w >= Wd) continue;
            float v = X.load(xo + X.woff[h * Wd + w]);
            if (bh < 0 || v > best) {
              best = v;
              bh = h;
              bw = w;
            }
          }
        if (bh == c[2] && bw == c[3]) acc += dy;
      }
    }
    outs[0]->f32()[DX.offset(p)] += static_cast<float>(acc);
  });
  return {};
}

}  // namespace

Status run_conv(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                const std::vector<Tensor*>& outs, const KernelOptions& o) {
  // The direct weight gradient is the pointwise product over its 8-d index space.
  if (op.kind == OpKind::kConv2dGradWeight && o.direct_conv)
    return run_pointwise(op, box, ins, outs, o);
  if (run_conv1x1(op, box, ins, outs, o)) return {};
  if (!o.direct_conv && run_conv_dnnl(op, box, ins, outs, o)) return {};
  // Every kernel below adds into its outputs: reset them first unless accumulating.
  if (store_mode(op) == Store::kAssign) {
    for (size_t i = 0; i < outs.size(); ++i)
      fill_box(*outs[i], op.results[i].proj.image(box).intersect(outs[i]->region()), 0.0f);
  } else {
    init_outputs(op, box, outs, o);
  }
  if (!o.direct_conv && run_conv_fast(op, box, ins, outs)) return {};
  switch (op.kind) {
    case OpKind::kConv2d:
      return conv_forward(op, box, ins, outs);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      return pool_forward(op, box, ins, outs);
    case OpKind::kConv2dGradInput:
      return conv_grad_input(op, box, ins, outs);
    case OpKind::kPool2dGrad:
      return pool_grad(op, box, ins, outs);
    default:
      return Diagnostic("no convolution kernel for '" + std::string(op_kind_name(op.kind)) + "'");
  }
}

}  // namespace heddle::kdetail
