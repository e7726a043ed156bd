// Private helpers shared by the convolution and pooling kernels (im2col + sgemm and oneDNN):
// rank-4 tiles in global coordinates, the op's named index dims, the projection-form checks that
// let a kernel read strides, padding and dilation off the operands, and the recognition of each
// op's form on a box (KernelConvForm.cpp).
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "KernelUtil.h"
#include "heddle/ir/WindowGeometry.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail::convform {

/// A rank-4 float tile addressed in global coordinates.
struct Tile4 {
  float* data = nullptr;
  int64_t org[4] = {0, 0, 0, 0}, ext[4] = {0, 0, 0, 0}, st[4] = {0, 0, 0, 0};

  explicit Tile4(const Tensor& t) : data(const_cast<float*>(t.f32())) {
    for (int d = 0; d < 4; ++d) {
      org[d] = t.origin()[d];
      ext[d] = t.shape()[d];
      st[d] = t.strides()[d];
    }
  }
  /// Offset of (a, b, c, e); c and e may lie outside the tile (callers test before reading).
  int64_t off(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return (a - org[0]) * st[0] + (b - org[1]) * st[1] + (c - org[2]) * st[2] +
           (e - org[3]) * st[3];
  }
  bool in_h(int64_t h) const { return h >= org[2] && h < org[2] + ext[2]; }
  bool in_w(int64_t w) const { return w >= org[3] && w < org[3] + ext[3]; }
  /// True when the tile holds the whole plane h x w (dims 2 and 3 from 0).
  bool whole(int64_t h, int64_t w) const {
    return org[2] == 0 && org[3] == 0 && ext[2] == h && ext[3] == w;
  }
};

/// A half-open range of one index dim of the box; dims the op lacks (no groups) are [0, 1).
struct Range {
  int64_t lo = 0, hi = 1;
  int64_t size() const { return hi - lo; }
};

/// The positions of the op's index dims, by name.
struct Dims {
  std::vector<int64_t> pos;  ///< index-dim positions by name order given; -1 when absent
  bool ok = true;
  Dims(const Op& op, std::initializer_list<const char*> names, const char* optional) {
    for (const char* n : names) {
      int64_t k = op.space.find(n);
      if (k < 0 && std::string_view(n) != optional) ok = false;
      pos.push_back(k);
    }
  }
  Range range(const Box& b, size_t i) const {
    return pos[i] < 0 ? Range{} : Range{b.start()[pos[i]], b.end()[pos[i]]};
  }
};

/// Strides, leading padding and dilations of the two spatial dims.
struct Geom {
  int64_t s0 = 1, s1 = 1, p0 = 0, p1 = 0, d0 = 1, d1 = 1;
  /// From the attributes with the defaults every reader uses (window_geometry(); what the
  /// direct gradient loops use too). Precondition: a conv or pooling kind.
  explicit Geom(const Op& op) {
    auto g = window_geometry(op.kind, op.attrs);
    if (!g.ok()) return;  // the verifier refuses such attributes
    s0 = g->stride[0];
    s1 = g->stride[1];
    p0 = g->padding[0];
    p1 = g->padding[1];
    d0 = g->dilation[0];
    d1 = g->dilation[1];
  }
};

/// One term of a projection row: index dim `dim` (-1: absent, skipped) with coefficient `coef`.
struct Term {
  int64_t dim, coef;
};

/// True when row `row` of `o`'s map is exactly `terms` (every other coefficient zero) plus
/// `offset`, with window `window` on that row.
inline bool row_is(const Operand& o, int64_t row, std::initializer_list<Term> terms,
                   int64_t offset = 0, int64_t window = 1) {
  const AffineMap& m = o.proj.map();
  if (m.out_rank() != 4 || m.offset()[row] != offset || o.proj.window()[row] != window)
    return false;
  std::vector<int64_t> want(static_cast<size_t>(m.in_rank()), 0);
  for (Term t : terms)
    if (t.dim >= 0) want[t.dim] = t.coef;
  for (int64_t k = 0; k < m.in_rank(); ++k)
    if (m.at(row, k) != want[k]) return false;
  return true;
}

/// The coefficient of index dim `dim` in row `row` of `o`'s map (0 when dim < 0).
inline int64_t coef(const Operand& o, int64_t row, int64_t dim) {
  return dim < 0 ? 0 : o.proj.map().at(row, dim);
}

/// Inputs and outputs of a kernel call, as the kernels receive them.
using Ins = std::vector<const Tensor*>;
using Outs = std::vector<Tensor*>;

/// conv2d over [n, (g), co, oh, ow, ci:sum]: X [n, g * cig + ci, h, w], W [g * cog + co, ci, KH,
/// KW] (whole taps in the tile), Y [n, g * cog + co, oh, ow].
struct ConvForward {
  Tile4 X, W, Y;
  Geom geo;  ///< strides and padding from the input's projection, dilation from the attributes
  int64_t KH, KW, cig, cog;      ///< taps; input and output channels per group
  Range rn, rg, co, oh, ow, ci;  ///< the box's ranges
};
/// The forward form of `op` on `box`, or nullopt when a projection is not of that form.
std::optional<ConvForward> conv_forward_form(const Op& op, const Box& box, const Ins& ins,
                                             const Outs& outs);

/// conv2d_grad_input over [n, (g), ci, ih, iw, co:sum]: DY and W tiles hold the whole output
/// plane OH x OW and all taps KH x KW; DX's plane is H x Wd.
struct ConvGradInput {
  Tile4 DY, W, DX;
  Geom geo;  ///< from the attributes
  int64_t OH, OW, KH, KW, H, Wd, cig, cog;
  Range rn, rg, ci, ih, iw, co;  ///< the box's ranges
};
/// The input-gradient form of `op` on `box`, or nullopt when a projection is not of that form.
std::optional<ConvGradInput> conv_grad_input_form(const Op& op, const Box& box, const Ins& ins,
                                                  const Outs& outs);

/// conv2d_grad_weight over [(g), co, ci, kh, kw, n:sum, oh:sum, ow:sum]; KH x KW are the taps.
struct ConvGradWeight {
  Tile4 X, DY, DW;
  Geom geo;  ///< strides, padding and dilation all from the input's projection
  int64_t KH, KW, cig, cog;
  Range rg, co, ci, kh, kw, rn, oh, ow;  ///< the box's ranges
};
/// The weight-gradient form of `op` on `box`, or nullopt when a projection is not of that form.
std::optional<ConvGradWeight> conv_grad_weight_form(const Op& op, const Box& box, const Ins& ins,
                                                    const Outs& outs);

/// max/avg pooling over [n, c, oh, ow] with windows k[0] x k[1].
struct PoolForward {
  Tile4 X, Y;
  Geom geo;  ///< strides and padding from the input's projection
  std::array<int64_t, 2> k;
  Range rn, rc, oh, ow;  ///< the box's ranges
};
/// The pooling form of `op` on `box` (rank 4), or nullopt when a projection is not of that form.
std::optional<PoolForward> pool_forward_form(const Op& op, const Box& box, const Ins& ins,
                                             const Outs& outs);

/// pool2d_grad over [n, c, ih, iw]: DY holds the whole output plane OH x OW, X the whole input
/// plane H x Wd; max pooling when `mx`, windows k[0] x k[1].
struct PoolGrad {
  Tile4 DY, X, DX;
  Geom geo;  ///< from the attributes
  int64_t OH, OW, H, Wd;
  bool mx;
  std::array<int64_t, 2> k;
  Range rn, rc, ih, iw;  ///< the box's ranges
};
/// The pooling-gradient form of `op` on `box` (rank 4), or nullopt when a projection is not of
/// that form.
std::optional<PoolGrad> pool_grad_form(const Op& op, const Box& box, const Ins& ins,
                                       const Outs& outs);

/// One step of a convolution's epilogue, applied to its result in order as a oneDNN post-op.
struct PostOp {
  enum Kind { kAdd, kMul, kMax, kMin, kRelu, kSigmoid, kSwish } kind = kAdd;
  /// kAdd to kMin: the other operand's value for each output channel of the box, in order.
  std::vector<float> channel;
};

}  // namespace heddle::kdetail::convform

namespace heddle::kdetail {

/// How many forward convolutions the products (run_conv1x1) have computed from their weights as
/// they are: oneDNN reuses the weights it keeps reordered only when none ran since it made them
/// (such a call may have been the op's last one with changed weights, which oneDNN did not see).
int64_t products_forward_epoch();

/// conv2d over `box` with `epilogue` applied to its result, which goes to `out` (a tile of the
/// result's image of `box`) through oneDNN post-ops (KernelDnnl.cpp); false (nothing written)
/// for forms it does not take (one problem per group, accumulation, no oneDNN implementation).
bool run_conv_dnnl_fused(const Op& op, const Box& box, const convform::Ins& ins, Tensor& out,
                         const std::vector<convform::PostOp>& epilogue, const KernelOptions& o);

/// conv2d, conv2d_grad_input and conv2d_grad_weight of a convolution of one group as matrix
/// products (KernelConv1x1.cpp), on `o.threads` threads: an unpadded 1x1 convolution with unit
/// strides as one product per image on the NCHW tiles in place; one with strides, or on a small
/// plane with wide outputs, and a larger window on such a plane (im2col columns), as one product
/// over the batch-packed images. A forward applies `epilogue` (when non-null) to its result.
/// Overwrites the result's image of `box`, or adds into it when `o.accumulate` (never with an
/// epilogue). False (nothing written) for other forms, boxes whose planes are not whole rows of
/// contiguous tiles (per image) or not whole planes (larger windows' input gradients),
/// options.reference or direct_conv, and forwards whose weights the caller marks unchanged or
/// that repeat on the same feeds (oneDNN keeps their weights reordered).
bool run_conv1x1(const Op& op, const Box& box, const convform::Ins& ins, const convform::Outs& outs,
                 const KernelOptions& o, const std::vector<convform::PostOp>* epilogue = nullptr);

/// Applies `ep` for channel `c` (its index among the channels whose values the binary steps
/// hold) to the `n` values at `y` in place (KernelConv1x1.cpp).
void apply_epilogue(const std::vector<convform::PostOp>& ep, int64_t c, float* y, int64_t n);

/// conv2d_grad_weight of a depthwise convolution (one input and one output channel per group)
/// by direct loops over the NCHW tiles (KernelConvDepthwise.cpp), for boxes over all taps;
/// overwrites the result's image of `box`, or adds into it when `o.accumulate`. False (nothing
/// written) for other forms, or an output gradient whose rows are not contiguous.
bool run_depthwise_grad_weight(const Op& op, const Box& box, const convform::Ins& ins,
                               const convform::Outs& outs, const KernelOptions& o);

/// A mul or add of a value per channel (dim 1) to a rank-4 operand walked plane by plane (dims 2
/// and 3 contiguous), or the gradient of such a mul (elementwise_grad of mul: dy times the value
/// per channel), into outs[0] (KernelChannelAffine.cpp); or a chain of two: a mul or add per
/// channel, then one on its result (batch norm's scale and shift), into outs[1] and, when not
/// null (the first result is read after the chain), outs[0]. `tile_of` gives each input's tile.
/// The same float arithmetic as the fused-chain loop; false (nothing written) for other forms.
bool run_channel_affine(const std::vector<const Op*>& ops, const Box& box,
                        const std::function<const Tensor*(ValueId)>& tile_of,
                        const std::vector<Tensor*>& outs);

/// True when `o`'s map is the identity plus an offset and its window is 1 (KernelConcat.cpp).
bool shifted_identity(const Operand& o, int64_t rank);

/// global_avgpool over boxes that hold whole planes (KernelGlobalPool.cpp), on `o.threads`
/// threads; false (nothing written) for other forms, accumulation or options.reference.
bool run_global_avgpool_fast(const Op& op, const Box& box, const convform::Ins& ins,
                             const convform::Outs& outs, const KernelOptions& o);

/// When calls[i] is a conv2d that oneDNN runs and the calls after it start with an epilogue it
/// takes as post-ops (KernelConvEpilogue.cpp): runs them as one convolution (and first the
/// independent calls among them, such as a bias's reshape), sets *end past the last call covered
/// and *status to the result, and returns true. Values inside the epilogue must be in
/// `temporaries` and read by no call after it; they are never written. A concat along the
/// channels of rank-4 tiles with such an epilogue (DenseNet's concat, batch norm and ReLU) runs
/// as one loop over the channel planes on `o.threads` threads instead. False: nothing ran.
bool run_conv_epilogue(const std::vector<kernels::BoundCall>& calls, size_t i,
                       const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                       Status* status);

}  // namespace heddle::kdetail
