// Property tests of the fast convolution and pooling kernels (oneDNN, with im2col + sgemm where a
// box's form needs it) against the direct reference loops: random shapes (groups, depthwise,
// channel multipliers, strides, dilations, asymmetric padding, kernels up to 7x7), random
// partitions of the index space (reduce dims split too) run on input tiles with origins (cropped
// to the box's image, with a margin, or whole), into own tiles or accumulated in place, on 1 or 2
// threads. Also concat by row copies against the same partitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "OpsTestUtil.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool windowed(OpKind k) {
  switch (k) {
    case OpKind::kConv2d:
    case OpKind::kConv2dGradInput:
    case OpKind::kConv2dGradWeight:
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kPool2dGrad:
      return true;
    default:
      return false;
  }
}

// A random conv (or pooling) with its training graph, which holds the gradient ops.
Graph random_graph(std::mt19937& rng, bool pool) {
  for (;;) {
    Graph g(pool ? "pool" : "conv");
    Ops ops(g);
    int64_t N = pick(rng, 1, 3), H = pick(rng, 1, 12), W = pick(rng, 1, 12);
    ValueId y = kNoValue;
    if (pool) {
      Pool2dOptions o;
      o.kernel = {pick(rng, 1, 4), pick(rng, 1, 4)};
      o.stride = {pick(rng, 1, 3), pick(rng, 1, 3)};
      o.padding = {pick(rng, 0, o.kernel[0] - 1), pick(rng, 0, o.kernel[1] - 1),
                   pick(rng, 0, o.kernel[0] - 1), pick(rng, 0, o.kernel[1] - 1)};
      if (o.kernel[0] > H + o.padding[0] + o.padding[2] ||
          o.kernel[1] > W + o.padding[1] + o.padding[3])
        continue;
      ValueId x = ops.param("x", TensorType(DType::kF32, IVec{N, pick(rng, 1, 6), H, W}));
      y = pick(rng, 0, 1) ? ops.maxpool2d(x, o) : ops.avgpool2d(x, o);
    } else {
      // Plain, grouped, depthwise (one input channel per group) and depthwise with a multiplier.
      int64_t form = pick(rng, 0, 3), G = 1, cig = pick(rng, 1, 5), cog = pick(rng, 1, 5);
      if (form == 1) G = pick(rng, 2, 4);
      if (form >= 2) {
        G = pick(rng, 2, 8);
        cig = 1;
        cog = form == 2 ? 1 : pick(rng, 2, 3);
      }
      Conv2dOptions o;
      int64_t k0 = pick(rng, 0, 5) == 0 ? 7 : pick(rng, 1, 5), k1 = pick(rng, 1, 5);
      o.stride = {pick(rng, 1, 3), pick(rng, 1, 3)};
      o.dilation = {pick(rng, 1, 2), pick(rng, 1, 2)};
      o.padding = {pick(rng, 0, 3), pick(rng, 0, 3), pick(rng, 0, 3), pick(rng, 0, 3)};
      o.groups = G;
      if (o.dilation[0] * (k0 - 1) + 1 > H + o.padding[0] + o.padding[2] ||
          o.dilation[1] * (k1 - 1) + 1 > W + o.padding[1] + o.padding[3])
        continue;
      y = ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{N, G * cig, H, W})),
                     ops.param("w", TensorType(DType::kF32, IVec{G * cog, cig, k0, k1})), o);
    }
    ops.output(ops.reduce(OpKind::kReduceSum, y, {0, 1, 2, 3}));
    EXPECT_TRUE(ops.status().ok());
    auto grads = build_gradients(g, g.outputs()[0]);
    if (!grads.ok()) continue;  // e.g. a padded window that never touches the tensor
    return std::move(grads->graph);
  }
}

// Inputs of `op`: uniform in [-1, 1), or (ties for max pooling) a few distinct values.
std::vector<Tensor> random_inputs(const Graph& g, const Op& op, std::mt19937& rng, bool ties) {
  std::vector<Tensor> in;
  for (const auto& x : op.inputs) {
    in.push_back(testing::random_tensor(g.type(x.value), rng));
    if (ties)
      for (int64_t i = 0; i < in.back().numel(); ++i)
        in.back().f32()[i] = std::round(in.back().f32()[i] * 2.0f) / 2.0f;
  }
  return in;
}

Tensor run_direct(const Graph& g, const Op& op, const std::vector<Tensor>& in) {
  Tensor out(g.type(op.results[0].value));
  std::vector<const Tensor*> ip;
  for (const auto& t : in) ip.push_back(&t);
  kernels::KernelOptions ko;
  ko.direct_conv = true;
  EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&out}, ko).ok());
  return out;
}

// An input tile for `piece`: its image (clipped to the tensor), grown by a random margin, or the
// whole tensor.
Tensor input_tile(const Operand& o, const Box& piece, const Tensor& whole, std::mt19937& rng) {
  Box img = o.proj.image(piece).intersect(whole.region());
  switch (pick(rng, 0, 3)) {
    case 0:
      return whole.crop(whole.region());
    case 1: {
      IVec m = IVec::filled(img.rank(), pick(rng, 1, 2));
      return whole.crop(Box(img.start() - m, img.end() + m).intersect(whole.region()));
    }
    default:
      return whole.crop(img);
  }
}

// Runs `op` as random pieces on tiles, with random options, and merges the result.
Tensor run_pieces(const Graph& g, const Op& op, const std::vector<Tensor>& in, std::mt19937& rng,
                  bool accumulate) {
  Tensor out(g.type(op.results[0].value));
  for (const Box& piece : testing::random_grid(op.space.box(), rng)) {
    std::vector<Tensor> tiles;
    for (size_t i = 0; i < in.size(); ++i)
      tiles.push_back(input_tile(op.inputs[i], piece, in[i], rng));
    std::vector<const Tensor*> ip;
    for (const auto& t : tiles) ip.push_back(&t);
    kernels::KernelOptions ko;
    ko.threads = static_cast<int>(pick(rng, 1, 2));
    ko.accumulate = accumulate;
    testing::run_piece_into(op, piece, ip, out, ko);
  }
  return out;
}

// Checks every windowed op of `g` (each whole box must be served by oneDNN, or a plain 1x1
// convolution by its matrix products).
void check_graph(const Graph& g, std::mt19937& rng, bool ties, int* checked) {
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    if (!windowed(op.kind)) continue;
    SCOPED_TRACE(std::string(op_kind_name(op.kind)) + " " + op.space.to_string());
    auto in = random_inputs(g, op, rng, ties);
    Tensor want = run_direct(g, op, in);
    std::vector<const Tensor*> ip;
    for (const auto& t : in) ip.push_back(&t);
    Tensor got(g.type(op.results[0].value));
    int64_t before = kernels::onednn_calls() + kernels::conv1x1_calls();
    kernels::KernelOptions ko;
    ko.threads = static_cast<int>(pick(rng, 1, 2));
    EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&got}, ko).ok());
    if (kernels::onednn_calls() + kernels::conv1x1_calls() == before)
      ADD_FAILURE() << "neither oneDNN nor the 1x1 products served the whole box";
    EXPECT_LT(testing::max_rel_diff(got, want), 1e-4) << "whole box";
    for (bool acc : {false, true})
      EXPECT_LT(testing::max_rel_diff(run_pieces(g, op, in, rng, acc), want), 1e-4)
          << "pieces, accumulate " << acc;
    ++*checked;
  }
}

TEST(DnnlKernels, ConvolutionsMatchTheDirectLoopsOnRandomShapesAndTiles) {
  std::mt19937 rng(16);
  int checked = 0;
  for (int round = 0; round < 100; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    check_graph(random_graph(rng, false), rng, false, &checked);
  }
  EXPECT_EQ(checked, 300);  // conv2d, its input and weight gradients
}

// A 1x1 convolution (and its gradients) with wide channel counts, past kOwnReorderMin
// (KernelDnnl.cpp: 2^19 weights), some multiples of oneDNN's blocks (16, 32, 48, 64) and some
// not: the weights and weight gradients go through the own reorders (KernelDnnlReorder.cpp) into
// and out of the blocked layouts, padded or not (and through oneDNN's for pieces below it).
Graph random_pointwise_graph(std::mt19937& rng) {
  auto channels = [&] { return pick(rng, 0, 1) ? 16 * pick(rng, 46, 68) : pick(rng, 725, 1100); };
  Graph g("pointwise");
  Ops ops(g);
  // Few points: the direct loops the test compares against take long at these widths.
  const int64_t N = 1, H = pick(rng, 1, 2), W = 1;
  const int64_t ci = channels(), co = channels();
  Conv2dOptions o;
  o.stride = {pick(rng, 1, 2), 1};
  ValueId y = ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{N, ci, H, W})),
                         ops.param("w", TensorType(DType::kF32, IVec{co, ci, 1, 1})), o);
  ops.output(ops.reduce(OpKind::kReduceSum, y, {0, 1, 2, 3}));
  EXPECT_TRUE(ops.status().ok());
  auto grads = build_gradients(g, g.outputs()[0]);
  EXPECT_TRUE(grads.ok());
  return std::move(grads->graph);
}

TEST(DnnlKernels, PointwiseConvolutionsWithWideChannelsMatchTheDirectLoops) {
  std::mt19937 rng(20);
  int checked = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g = random_pointwise_graph(rng);
    check_graph(g, rng, false, &checked);
    // The weight gradient added into what its output holds (the own reorder's sum), whole.
    for (const Op& op : g.ops()) {
      if (op.kind != OpKind::kConv2dGradWeight) continue;
      auto in = random_inputs(g, op, rng, false);
      Tensor want = run_direct(g, op, in), got = want;
      kernels::KernelOptions ko;
      ko.accumulate = true;
      EXPECT_TRUE(kernels::run(op, op.space.box(), {&in[0], &in[1]}, {&got}, ko).ok());
      for (int64_t i = 0; i < want.numel(); ++i) want.f32()[i] *= 2.0f;
      EXPECT_LT(testing::max_rel_diff(got, want), 1e-4) << "accumulated";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);  // conv2d, its input and weight gradients; the accumulated gradient
}

// The reordered weights a forward convolution keeps (KernelOptions::unchanged_inputs): reused
// while the caller marks the weights unchanged, reordered afresh when it does not (weights
// changed in place, as training does, also when the products of KernelConv1x1.cpp computed that
// call), never confused between weight tensors.
TEST(DnnlKernels, KeptWeightsFollowTheUnchangedInputsBit) {
  std::mt19937 rng(19);
  int checked = 0;
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g = random_graph(rng, false);
    const Op* conv = nullptr;
    for (const Op& op : g.ops())
      if (op.kind == OpKind::kConv2d) conv = &op;
    ASSERT_NE(conv, nullptr);
    auto in = random_inputs(g, *conv, rng, false);
    auto other = random_inputs(g, *conv, rng, false);  // a second weight tensor
    // `repeat`: a forward-only loop's call (oneDNN's from the first one); without it a
    // convolution on a small plane goes to the products, which oneDNN's kept copy must notice.
    auto run = [&](const Tensor& w, uint32_t bits, bool repeat = false) {
      Tensor got(g.type(conv->results[0].value));
      kernels::KernelOptions ko;
      ko.unchanged_inputs = bits;
      ko.feeds_repeat = repeat;
      EXPECT_TRUE(kernels::run(*conv, conv->space.box(), {&in[0], &w}, {&got}, ko).ok());
      return got;
    };
    auto want = [&](const Tensor& w) { return run_direct(g, *conv, {in[0], w}); };
    Tensor first = run(in[1], 0, true);
    EXPECT_LT(testing::max_rel_diff(first, want(in[1])), 1e-4) << "first call";
    Tensor again = run(in[1], 2);  // unchanged: the kept weights, the same bytes
    EXPECT_EQ(std::memcmp(again.f32(), first.f32(), 4 * first.numel()), 0) << "kept weights";
    EXPECT_LT(testing::max_rel_diff(run(other[1], 2), want(other[1])), 1e-4) << "other weights";
    for (int64_t i = 0; i < in[1].numel(); ++i) in[1].f32()[i] = -2.0f * in[1].f32()[i] + 0.5f;
    EXPECT_LT(testing::max_rel_diff(run(in[1], 0), want(in[1])), 1e-4) << "changed in place";
    EXPECT_LT(testing::max_rel_diff(run(in[1], 2), want(in[1])), 1e-4) << "then kept";
    ++checked;
  }
  EXPECT_EQ(checked, 40);
}

TEST(DnnlKernels, PoolingMatchesTheDirectLoopsOnRandomShapesTilesAndTies) {
  std::mt19937 rng(17);
  int checked = 0;
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    check_graph(random_graph(rng, true), rng, round % 3 == 0, &checked);
  }
  EXPECT_EQ(checked, 400);  // pooling and its gradient
}

TEST(DnnlKernels, ConcatCopiesMatchThePointwiseDefinition) {
  std::mt19937 rng(18);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("concat");
    Ops ops(g);
    int64_t r = pick(rng, 1, 4), axis = pick(rng, 0, r - 1);
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < r; ++d) shape.push_back(pick(rng, 1, 5));
    std::vector<ValueId> xs;
    for (int64_t i = pick(rng, 1, 4); i > 0; --i) {
      shape[axis] = pick(rng, 1, 4);
      xs.push_back(ops.param("x" + std::to_string(i), TensorType(DType::kF32, IVec(shape))));
    }
    ops.output(ops.concat(xs, axis));
    ASSERT_TRUE(ops.status().ok());
    const Op& op = g.op(0);
    auto in = random_inputs(g, op, rng, false);
    // The definition: each output element is the one input element its coordinate maps to.
    Tensor want(g.type(op.results[0].value));
    for (size_t i = 0; i < in.size(); ++i) {
      const IVec& off = op.inputs[i].proj.map().offset();
      testing::for_all(in[i].shape(), [&](const IVec& q) { want.set(q - off, in[i].at(q)); });
    }
    EXPECT_TRUE(testing::run_whole(g, 0, in)[0] == want);
    EXPECT_TRUE(run_pieces(g, op, in, rng, false) == want);
  }
}

}  // namespace
}  // namespace heddle
