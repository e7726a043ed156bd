// The im2col + sgemm convolution kernels and the pooling loops, forward and backward, on random
// shapes (strides, dilations, asymmetric padding, groups): the whole index box against a naive
// evaluator written here from the math and against the direct loops, and random sub-box
// partitions (reduce dims, kernel taps and groups split too) against the whole box.
#include <gtest/gtest.h>

#include <cmath>

#include "OpsTestUtil.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

using testing::for_all;

struct Geo {
  int64_t s0, s1, p0, p1, d0 = 1, d1 = 1, k0 = 1, k1 = 1, groups = 1;
};

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A training graph of one conv (or pool) whose backward holds the gradient kernels.
struct Built {
  Graph g;
  Geo geo;
};

Built random_conv(std::mt19937& rng) {
  for (;;) {
    Geo c;
    c.groups = pick(rng, 1, 2);
    int64_t N = pick(rng, 1, 2), C = c.groups * pick(rng, 1, 3), CO = c.groups * pick(rng, 1, 3);
    int64_t H = pick(rng, 3, 9), W = pick(rng, 3, 9);
    c.k0 = pick(rng, 1, 3);
    c.k1 = pick(rng, 1, 3);
    c.s0 = pick(rng, 1, 2);
    c.s1 = pick(rng, 1, 2);
    c.d0 = pick(rng, 1, 2);
    c.d1 = pick(rng, 1, 2);
    std::vector<int64_t> pad = {pick(rng, 0, 2), pick(rng, 0, 2), pick(rng, 0, 2), pick(rng, 0, 2)};
    c.p0 = pad[0];
    c.p1 = pad[1];
    if (c.d0 * (c.k0 - 1) + 1 > H + pad[0] + pad[2] || c.d1 * (c.k1 - 1) + 1 > W + pad[1] + pad[3])
      continue;
    Built b{Graph("conv"), c};
    Ops ops(b.g);
    Conv2dOptions o;
    o.stride = {c.s0, c.s1};
    o.padding = pad;
    o.dilation = {c.d0, c.d1};
    o.groups = c.groups;
    ValueId y =
        ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{N, C, H, W})),
                   ops.param("w", TensorType(DType::kF32, IVec{CO, C / c.groups, c.k0, c.k1})), o);
    ops.output(ops.reduce(OpKind::kReduceSum, y, {0, 1, 2, 3}));
    EXPECT_TRUE(ops.status().ok());
    return b;
  }
}

Built random_pool(std::mt19937& rng, bool mx) {
  Geo c;
  c.k0 = pick(rng, 1, 3);
  c.k1 = pick(rng, 1, 3);
  c.s0 = pick(rng, 1, 2);
  c.s1 = pick(rng, 1, 3);
  c.p0 = pick(rng, 0, c.k0 - 1);
  c.p1 = pick(rng, 0, c.k1 - 1);
  Built b{Graph("pool"), c};
  Ops ops(b.g);
  Pool2dOptions o{{c.k0, c.k1}, {c.s0, c.s1}, {c.p0, c.p1}};
  ValueId x = ops.param("x", TensorType(DType::kF32, IVec{pick(rng, 1, 2), pick(rng, 1, 3),
                                                          pick(rng, 3, 8), pick(rng, 3, 8)}));
  ValueId y = mx ? ops.maxpool2d(x, o) : ops.avgpool2d(x, o);
  ops.output(ops.reduce(OpKind::kReduceSum, y, {0, 1, 2, 3}));
  EXPECT_TRUE(ops.status().ok());
  return b;
}

// Naive evaluators from the math (doubles), each given the op's input tensors in order.
Tensor naive_conv(const Geo& c, const Tensor& x, const Tensor& w, const IVec& ys) {
  Tensor y(DType::kF32, ys);
  int64_t cig = w.shape()[1], cog = ys[1] / c.groups;
  for_all(ys, [&](const IVec& p) {
    double acc = 0;
    for (int64_t ci = 0; ci < cig; ++ci)
      for (int64_t i = 0; i < c.k0; ++i)
        for (int64_t j = 0; j < c.k1; ++j) {
          int64_t h = p[2] * c.s0 - c.p0 + i * c.d0, v = p[3] * c.s1 - c.p1 + j * c.d1;
          if (h < 0 || v < 0 || h >= x.shape()[2] || v >= x.shape()[3]) continue;
          acc += x.at(IVec{p[0], p[1] / cog * cig + ci, h, v}) * w.at(IVec{p[1], ci, i, j});
        }
    y.set(p, acc);
  });
  return y;
}

// Calls f(x coordinate, y coordinate, w coordinate) for every in-bounds tap of the forward conv.
template <class F>
void each_tap(const Geo& c, const IVec& xs, const IVec& ws, const IVec& ys, F&& f) {
  int64_t cig = ws[1], cog = ys[1] / c.groups;
  for_all(ys, [&](const IVec& p) {
    for (int64_t ci = 0; ci < cig; ++ci)
      for (int64_t i = 0; i < c.k0; ++i)
        for (int64_t j = 0; j < c.k1; ++j) {
          int64_t h = p[2] * c.s0 - c.p0 + i * c.d0, v = p[3] * c.s1 - c.p1 + j * c.d1;
          if (h < 0 || v < 0 || h >= xs[2] || v >= xs[3]) continue;
          f(IVec{p[0], p[1] / cog * cig + ci, h, v}, p, IVec{p[1], ci, i, j});
        }
  });
}

Tensor naive_pool_grad(const Geo& c, bool mx, const Tensor& dy, const Tensor& x) {
  std::vector<double> acc(static_cast<size_t>(x.numel()), 0.0);
  const IVec& xs = x.shape();
  auto lin = [&](const IVec& q) { return ((q[0] * xs[1] + q[1]) * xs[2] + q[2]) * xs[3] + q[3]; };
  for_all(dy.shape(), [&](const IVec& p) {
    std::vector<IVec> in;
    for (int64_t i = 0; i < c.k0; ++i)
      for (int64_t j = 0; j < c.k1; ++j) {
        int64_t h = p[2] * c.s0 - c.p0 + i, v = p[3] * c.s1 - c.p1 + j;
        if (h >= 0 && v >= 0 && h < xs[2] && v < xs[3]) in.push_back(IVec{p[0], p[1], h, v});
      }
    if (!mx) {
      for (const auto& q : in) acc[lin(q)] += dy.at(p) / static_cast<double>(c.k0 * c.k1);
      return;
    }
    const IVec* best = &in[0];
    for (const auto& q : in)
      if (x.at(q) > x.at(*best)) best = &q;
    acc[lin(*best)] += dy.at(p);
  });
  Tensor r(DType::kF32, xs);
  for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = static_cast<float>(acc[i]);
  return r;
}

Tensor naive_pool(const Geo& c, bool mx, const Tensor& x, const IVec& ys) {
  Tensor y(DType::kF32, ys);
  for_all(ys, [&](const IVec& p) {
    double acc = mx ? -INFINITY : 0.0;
    for (int64_t i = 0; i < c.k0; ++i)
      for (int64_t j = 0; j < c.k1; ++j) {
        int64_t h = p[2] * c.s0 - c.p0 + i, v = p[3] * c.s1 - c.p1 + j;
        if (h < 0 || v < 0 || h >= x.shape()[2] || v >= x.shape()[3]) continue;
        acc = mx ? std::max(acc, x.at(IVec{p[0], p[1], h, v})) : acc + x.at(IVec{p[0], p[1], h, v});
      }
    y.set(p, mx ? acc : acc / static_cast<double>(c.k0 * c.k1));
  });
  return y;
}

Tensor naive(const Geo& c, const Op& op, const Graph& g, const std::vector<Tensor>& in) {
  const IVec& rs = g.type(op.results[0].value).shape();
  switch (op.kind) {
    case OpKind::kConv2d:
      return naive_conv(c, in[0], in[1], rs);
    case OpKind::kConv2dGradInput: {  // inputs dy, w
      Tensor dx(DType::kF32, rs);
      std::vector<double> acc(static_cast<size_t>(dx.numel()), 0.0);
      each_tap(c, rs, in[1].shape(), in[0].shape(),
               [&](const IVec& xq, const IVec& yq, const IVec& wq) {
                 acc[((xq[0] * rs[1] + xq[1]) * rs[2] + xq[2]) * rs[3] + xq[3]] +=
                     in[0].at(yq) * in[1].at(wq);
               });
      for (int64_t i = 0; i < dx.numel(); ++i) dx.f32()[i] = static_cast<float>(acc[i]);
      return dx;
    }
    case OpKind::kConv2dGradWeight: {  // inputs x, dy
      Tensor dw(DType::kF32, rs);
      std::vector<double> acc(static_cast<size_t>(dw.numel()), 0.0);
      each_tap(c, in[0].shape(), rs, in[1].shape(),
               [&](const IVec& xq, const IVec& yq, const IVec& wq) {
                 acc[((wq[0] * rs[1] + wq[1]) * rs[2] + wq[2]) * rs[3] + wq[3]] +=
                     in[0].at(xq) * in[1].at(yq);
               });
      for (int64_t i = 0; i < dw.numel(); ++i) dw.f32()[i] = static_cast<float>(acc[i]);
      return dw;
    }
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      return naive_pool(c, op.kind == OpKind::kMaxPool2d, in[0], rs);
    case OpKind::kPool2dGrad:
      return naive_pool_grad(c, std::get<std::string>(op.attrs.at("mode")) == "max", in[0], in[1]);
    default:
      ADD_FAILURE() << "no naive evaluator for " << op_kind_name(op.kind);
      return Tensor();
  }
}

std::vector<Tensor> run_direct(const Graph& g, OpId id, const std::vector<Tensor>& inputs) {
  const Op& op = g.op(id);
  Tensor out(g.type(op.results[0].value));
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  kernels::KernelOptions ko;
  ko.direct_conv = true;
  EXPECT_TRUE(kernels::run(op, op.space.box(), in, {&out}, ko).ok());
  return {out};
}

// Checks every windowed op of the training graph of `b`; returns how many it checked and counts
// in `differ` the conv kernels whose result is not bitwise the direct loops' (float sgemm sums
// against double sums: evidence that the fast path ran rather than falling back).
int check_all(const Built& b, std::mt19937& rng, int* differ = nullptr) {
  auto grads = build_gradients(b.g, b.g.outputs()[0]);
  EXPECT_TRUE(grads.ok()) << (grads.ok() ? "" : grads.error().to_string());
  if (!grads.ok()) return 0;
  const Graph& g = grads->graph;
  int checked = 0;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    switch (op.kind) {
      case OpKind::kConv2d:
      case OpKind::kConv2dGradInput:
      case OpKind::kConv2dGradWeight:
      case OpKind::kMaxPool2d:
      case OpKind::kAvgPool2d:
      case OpKind::kPool2dGrad:
        break;
      default:
        continue;
    }
    SCOPED_TRACE(std::string(op_kind_name(op.kind)) + " " + op.space.to_string());
    std::vector<Tensor> in;
    for (const auto& x : op.inputs) in.push_back(testing::random_tensor(g.type(x.value), rng));
    auto fast = testing::run_whole(g, id, in);
    EXPECT_LT(testing::max_rel_diff(fast[0], naive(b.geo, op, g, in)), 2e-5);
    auto direct = run_direct(g, id, in);
    EXPECT_LT(testing::max_rel_diff(fast[0], direct[0]), 2e-5);
    if (differ && !(fast[0] == direct[0])) ++*differ;
    for (bool acc : {false, true}) {
      auto parts = testing::run_pieces(g, id, in, rng, acc);
      // pool2d_grad sums windows too: oneDNN (whole planes) and the loops (sub-boxes) round
      // differently.
      if (op.space.has_reduce() || op.kind == OpKind::kPool2dGrad)
        EXPECT_LT(testing::max_rel_diff(parts[0], fast[0]), 2e-5) << "accumulate " << acc;
      else
        EXPECT_TRUE(parts[0] == fast[0]) << "tiles differ bitwise, accumulate " << acc;
    }
    ++checked;
  }
  return checked;
}

TEST(ConvKernels, Im2colForwardAndBackwardMatchNaiveDirectAndSubBoxes) {
  std::mt19937 rng(2026);
  int differ = 0;
  for (int round = 0; round < 60; ++round) {
    Built b = random_conv(rng);
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(check_all(b, rng, &differ), 3);  // conv2d, its input and weight gradients
  }
  EXPECT_GT(differ, 30) << "the im2col kernels never ran";
}

TEST(ConvKernels, PoolingForwardAndBackwardMatchNaiveDirectAndSubBoxes) {
  std::mt19937 rng(77);
  for (int round = 0; round < 60; ++round) {
    Built b = random_pool(rng, round % 2 == 0);
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(check_all(b, rng), 2);
  }
}

// A halo split: output rows cut in two, each half computed from an input tile holding only its
// rows plus the halo (the far side reads as padding only where the tensor ends).
TEST(ConvKernels, HaloTilesGiveTheWholeResult) {
  std::mt19937 rng(5);
  Graph g("halo");
  Ops ops(g);
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  ValueId x = ops.input("x", TensorType(DType::kF32, IVec{2, 3, 10, 7}));
  ops.output(ops.conv2d(x, ops.input("w", TensorType(DType::kF32, IVec{4, 3, 3, 3})), o));
  const Op& op = g.op(0);
  std::vector<Tensor> in = {testing::random_tensor(g.type(op.inputs[0].value), rng),
                            testing::random_tensor(g.type(op.inputs[1].value), rng)};
  auto whole = testing::run_whole(g, 0, in);
  Tensor merged(g.type(op.results[0].value));
  Box all = op.space.box();
  int64_t oh = op.space.find("oh");
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 2}, {2, all.end()[oh]}}) {
    Box piece(all.start().with(oh, lo), all.end().with(oh, hi));
    Tensor xt = in[0].crop(op.inputs[0].proj.image(piece).intersect(in[0].region()));
    Tensor yt = Tensor::tile(DType::kF32, op.results[0].proj.image(piece));
    ASSERT_TRUE(kernels::run(op, piece, {&xt, &in[1]}, {&yt}).ok());
    merged.copy_from(yt);
  }
  EXPECT_LT(testing::max_rel_diff(merged, whole[0]), 1e-6);
}

// global_avgpool's plane sums against the reference loops: random shapes, boxes over some images
// and channels (whole planes), input tiles that are the box's image or the whole tensor, 1 or 2
// threads.
TEST(ConvKernels, GlobalAvgPoolPlanesMatchTheReference) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("gap");
    Ops ops(g);
    ValueId x = ops.input("x", TensorType(DType::kF32, IVec{pick(rng, 1, 3), pick(rng, 1, 40),
                                                            pick(rng, 1, 9), pick(rng, 1, 9)}));
    ops.output(ops.global_avgpool(x));
    const Op& op = g.op(0);
    Tensor in = testing::random_tensor(g.type(x), rng);
    Box all = op.space.box();
    std::vector<int64_t> lo(all.start().values()), hi(all.end().values());
    for (int64_t d : {0, 1}) {
      lo[d] = pick(rng, 0, all.end()[d] - 1);
      hi[d] = pick(rng, lo[d] + 1, all.end()[d]);
    }
    Box piece{IVec(lo), IVec(hi)};
    Tensor xt = pick(rng, 0, 1) ? in : in.crop(op.inputs[0].proj.image(piece));
    Tensor want = Tensor::tile(DType::kF32, op.results[0].proj.image(piece));
    Tensor got = want;
    kernels::KernelOptions ref;
    ref.reference = true;
    ASSERT_TRUE(kernels::run(op, piece, {&xt}, {&want}, ref).ok());
    kernels::KernelOptions fast;
    fast.threads = static_cast<int>(pick(rng, 1, 2));
    ASSERT_TRUE(kernels::run(op, piece, {&xt}, {&got}, fast).ok());
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(got.f32()[i], want.f32()[i], 1e-5 * std::max(1.0f, std::abs(want.f32()[i])));
  }
}

}  // namespace
}  // namespace heddle
