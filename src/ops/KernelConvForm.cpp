// The projection forms of the convolution and pooling ops that the im2col + sgemm and oneDNN
// kernels compute: each function checks every projection against the form and reads the tiles,
// the geometry and the box's ranges off the operands.
#include "KernelConvForm.h"

namespace heddle::kdetail::convform {

namespace {

// The range of dim `d` of `box`.
Range along(const Box& box, int64_t d) { return {box.start()[d], box.end()[d]}; }

}  // namespace

std::optional<ConvForward> conv_forward_form(const Op& op, const Box& box, const Ins& ins,
                                             const Outs& outs) {
  Dims d(op, {"n", "g", "co", "oh", "ow", "ci"}, "g");
  if (!d.ok || ins.size() != 2) return std::nullopt;
  Tile4 X(*ins[0]), W(*ins[1]), Y(*outs[0]);
  const int64_t KH = op.inputs[1].proj.window()[2], KW = op.inputs[1].proj.window()[3];
  if (!W.whole(KH, KW)) return std::nullopt;
  const int64_t cig = op.space.dim(d.pos[5]).extent, cog = op.space.dim(d.pos[2]).extent;
  const int64_t n_ = d.pos[0], g_ = d.pos[1], co_ = d.pos[2], oh_ = d.pos[3], ow_ = d.pos[4],
                ci_ = d.pos[5];
  // Geometry from the input's projection (strides, padding), dilation from the attributes, and
  // every projection checked to be the form assumed.
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
    return std::nullopt;
  return ConvForward{X,
                     W,
                     Y,
                     geo,
                     KH,
                     KW,
                     cig,
                     cog,
                     d.range(box, 0),
                     d.range(box, 1),
                     d.range(box, 2),
                     d.range(box, 3),
                     d.range(box, 4),
                     d.range(box, 5)};
}

std::optional<ConvGradInput> conv_grad_input_form(const Op& op, const Box& box, const Ins& ins,
                                                  const Outs& outs) {
  Dims d(op, {"n", "g", "ci", "ih", "iw", "co"}, "g");
  if (!d.ok) return std::nullopt;
  Tile4 DY(*ins[0]), W(*ins[1]), DX(*outs[0]);
  const IVec &yw = op.inputs[0].proj.window(), &ww = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], KH = ww[2], KW = ww[3];
  if (!W.whole(KH, KW) || !DY.whole(OH, OW)) return std::nullopt;
  const int64_t cig = op.space.dim(d.pos[2]).extent, cog = op.space.dim(d.pos[5]).extent;
  const int64_t n_ = d.pos[0], g_ = d.pos[1], ci_ = d.pos[2], ih_ = d.pos[3], iw_ = d.pos[4],
                co_ = d.pos[5];
  const Operand &yo = op.inputs[0], &wo = op.inputs[1], &xo = op.results[0];
  if (!row_is(yo, 0, {{n_, 1}}) || !row_is(yo, 1, {{g_, cog}, {co_, 1}}) ||
      !row_is(yo, 2, {}, 0, OH) || !row_is(yo, 3, {}, 0, OW) ||
      !row_is(wo, 0, {{g_, cog}, {co_, 1}}) || !row_is(wo, 1, {{ci_, 1}}) ||
      !row_is(wo, 2, {}, 0, KH) || !row_is(wo, 3, {}, 0, KW) || !row_is(xo, 0, {{n_, 1}}) ||
      !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) || !row_is(xo, 2, {{ih_, 1}}) ||
      !row_is(xo, 3, {{iw_, 1}}))
    return std::nullopt;
  return ConvGradInput{DY,
                       W,
                       DX,
                       Geom(op),
                       OH,
                       OW,
                       KH,
                       KW,
                       op.space.dim(ih_).extent,
                       op.space.dim(iw_).extent,
                       cig,
                       cog,
                       d.range(box, 0),
                       d.range(box, 1),
                       d.range(box, 2),
                       d.range(box, 3),
                       d.range(box, 4),
                       d.range(box, 5)};
}

std::optional<ConvGradWeight> conv_grad_weight_form(const Op& op, const Box& box, const Ins& ins,
                                                    const Outs& outs) {
  Dims d(op, {"g", "co", "ci", "kh", "kw", "n", "oh", "ow"}, "g");
  if (!d.ok) return std::nullopt;
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
    return std::nullopt;
  return ConvGradWeight{X,
                        DY,
                        DW,
                        geo,
                        op.space.dim(kh_).extent,
                        op.space.dim(kw_).extent,
                        cig,
                        cog,
                        d.range(box, 0),
                        d.range(box, 1),
                        d.range(box, 2),
                        d.range(box, 3),
                        d.range(box, 4),
                        d.range(box, 5),
                        d.range(box, 6),
                        d.range(box, 7)};
}

std::optional<PoolForward> pool_forward_form(const Op& op, const Box& box, const Ins& ins,
                                             const Outs& outs) {
  if (box.rank() != 4) return std::nullopt;
  Tile4 X(*ins[0]), Y(*outs[0]);
  // Window, strides and padding from the input's projection, as the direct loop reads them.
  const Operand &xo = op.inputs[0], &yo = op.results[0];
  const std::array<int64_t, 2> k = {xo.proj.window()[2], xo.proj.window()[3]};
  Geom geo(op);
  geo.s0 = coef(xo, 2, 2);
  geo.s1 = coef(xo, 3, 3);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{0, 1}}) || !row_is(xo, 1, {{1, 1}}) ||
      !row_is(xo, 2, {{2, geo.s0}}, -geo.p0, k[0]) || !row_is(xo, 3, {{3, geo.s1}}, -geo.p1, k[1]))
    return std::nullopt;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(yo, r, {{r, 1}})) return std::nullopt;
  return PoolForward{X, Y, geo, k, along(box, 0), along(box, 1), along(box, 2), along(box, 3)};
}

std::optional<PoolGrad> pool_grad_form(const Op& op, const Box& box, const Ins& ins,
                                       const Outs& outs) {
  if (box.rank() != 4) return std::nullopt;
  Tile4 DY(*ins[0]), X(*ins[1]), DX(*outs[0]);
  const IVec &yw = op.inputs[0].proj.window(), &xw = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], H = xw[2], Wd = xw[3];
  if (!X.whole(H, Wd) || !DY.whole(OH, OW)) return std::nullopt;
  for (int64_t r = 0; r < 2; ++r)
    if (!row_is(op.inputs[0], r, {{r, 1}}) || !row_is(op.inputs[1], r, {{r, 1}}))
      return std::nullopt;
  if (!row_is(op.inputs[0], 2, {}, 0, OH) || !row_is(op.inputs[0], 3, {}, 0, OW) ||
      !row_is(op.inputs[1], 2, {}, 0, H) || !row_is(op.inputs[1], 3, {}, 0, Wd))
    return std::nullopt;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(op.results[0], r, {{r, 1}})) return std::nullopt;
  auto k = attr_ints(op, "kernel", {1, 1});
  if (k.size() != 2) return std::nullopt;
  return PoolGrad{DY,
                  X,
                  DX,
                  Geom(op),
                  OH,
                  OW,
                  H,
                  Wd,
                  attr_s(op, "mode") == "max",
                  std::array<int64_t, 2>{k[0], k[1]},
                  along(box, 0),
                  along(box, 1),
                  along(box, 2),
                  along(box, 3)};
}

}  // namespace heddle::kdetail::convform
