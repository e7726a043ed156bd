// Property tests of the 1x1 convolutions as matrix products on NCHW tiles (KernelConv1x1.cpp)
// against the direct reference loops: random shapes (channels 1-40, planes 1x1 to 10x10, batch
// 1-4), the forward and both gradients on the whole box and on random pieces (reduce dims split
// too) over input tiles with origins, overwriting and accumulating, on 1 or 2 threads; the
// forward fused with a bias and ReLU as the ONNX import writes them; and results that repeat
// bitwise run to run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "OpsTestUtil.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

struct Shape {
  int64_t N, C, K, H, W;  // images, input and output channels, plane
};

Shape random_shape(std::mt19937& rng) {
  return {pick(rng, 1, 4), pick(rng, 1, 40), pick(rng, 1, 40), pick(rng, 1, 10), pick(rng, 1, 10)};
}

// A convolution's training graph (1x1 taps unless `taps`, strides `sh` x `sw`, options `co`):
// the conv and its input and weight gradients.
Graph conv_graph(const Shape& s, int64_t sh = 1, int64_t sw = 1, int64_t taps = 1,
                 Conv2dOptions co = {}) {
  Graph g("conv1x1");
  Ops ops(g);
  co.stride = {sh, sw};
  ValueId y = ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{s.N, s.C, s.H, s.W})),
                         ops.param("w", TensorType(DType::kF32, IVec{s.K, s.C, taps, taps})), co);
  ops.output(ops.reduce(OpKind::kReduceSum, y, {0, 1, 2, 3}));
  EXPECT_TRUE(ops.status().ok());
  auto grads = build_gradients(g, g.outputs()[0]);
  EXPECT_TRUE(grads.ok());
  return std::move(grads->graph);
}

bool is_conv(OpKind k) {
  return k == OpKind::kConv2d || k == OpKind::kConv2dGradInput || k == OpKind::kConv2dGradWeight;
}

Tensor run_direct(const Graph& g, const Op& op, const std::vector<const Tensor*>& in) {
  Tensor out(g.type(op.results[0].value));
  kernels::KernelOptions ko;
  ko.direct_conv = true;
  EXPECT_TRUE(kernels::run(op, op.space.box(), in, {&out}, ko).ok());
  return out;
}

// Random values for the inputs of a convolution op and the direct loops' result on them.
struct Case {
  std::vector<Tensor> in;
  std::vector<const Tensor*> ip;  // into `in`
  Tensor want;
};
Case random_case(const Graph& g, const Op& op, std::mt19937& rng) {
  Case c;
  for (const auto& x : op.inputs) c.in.push_back(testing::random_tensor(g.type(x.value), rng));
  for (const auto& t : c.in) c.ip.push_back(&t);
  c.want = run_direct(g, op, c.ip);
  return c;
}

std::string label(int round, const Shape& s) {
  return "round " + std::to_string(round) + ": N " + std::to_string(s.N) + " C " +
         std::to_string(s.C) + " K " + std::to_string(s.K) + " plane " + std::to_string(s.H) + "x" +
         std::to_string(s.W);
}

// `op` over its whole box on 1 and 2 threads (splitting even tiny products): served by the 1x1
// path, near the direct loops' `want`, bitwise repeatable; with `accumulate`, also added into an
// output that holds `want` already.
void check_whole_box(const Graph& g, const Op& op, const std::vector<const Tensor*>& ip,
                     const Tensor& want, bool accumulate) {
  for (int threads : {1, 2}) {
    kernels::KernelOptions ko;
    ko.threads = threads;
    ko.grain = 1;
    Tensor got(g.type(op.results[0].value)), again(g.type(op.results[0].value));
    got.fill(7.0);  // points without a gradient must be reset too
    const int64_t before = kernels::conv1x1_calls();
    EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&got}, ko).ok());
    EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&again}, ko).ok());
    EXPECT_EQ(kernels::conv1x1_calls(), before + 2) << "the 1x1 path did not serve the box";
    EXPECT_LT(testing::max_rel_diff(got, want), 1e-4) << "whole box, threads " << threads;
    EXPECT_EQ(std::memcmp(got.f32(), again.f32(), 4 * got.numel()), 0) << "run to run";
    if (!accumulate) continue;
    ko.accumulate = true;
    Tensor twice = want;
    for (int64_t i = 0; i < twice.numel(); ++i) twice.f32()[i] *= 2.0f;
    EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&got}, ko).ok());
    EXPECT_LT(testing::max_rel_diff(got, twice), 1e-4) << "accumulated, threads " << threads;
  }
}

// Runs `op` as random pieces, each on input tiles (its image, or the whole tensor) on 1 or 2
// threads splitting even tiny products (grain 1), and merges them: accumulated in place, or each
// into its own tile whose unwritten elements would show. *served: pieces the 1x1 path took.
Tensor run_pieces(const Graph& g, const Op& op, const std::vector<Tensor>& in, std::mt19937& rng,
                  bool accumulate, int* served) {
  Tensor out(g.type(op.results[0].value));
  for (const Box& piece : testing::random_grid(op.space.box(), rng)) {
    std::vector<Tensor> tiles;
    for (size_t i = 0; i < in.size(); ++i)
      tiles.push_back(pick(rng, 0, 2) == 0
                          ? in[i].crop(in[i].region())
                          : in[i].crop(op.inputs[i].proj.image(piece).intersect(in[i].region())));
    std::vector<const Tensor*> ip;
    for (const auto& t : tiles) ip.push_back(&t);
    kernels::KernelOptions ko;
    ko.threads = static_cast<int>(pick(rng, 1, 2));
    ko.grain = 1;
    ko.accumulate = accumulate;
    const int64_t before = kernels::conv1x1_calls();
    testing::run_piece_into(op, piece, ip, out, ko);
    *served += kernels::conv1x1_calls() > before;
  }
  return out;
}

// Every convolution op of `g` on random inputs: the whole box (check_whole_box, accumulating
// too) and random pieces, overwriting and accumulating. Returns how many ops were checked.
int check_convs(const Graph& g, std::mt19937& rng, int* pieces_served) {
  int checked = 0;
  for (const Op& op : g.ops()) {
    if (!is_conv(op.kind)) continue;
    SCOPED_TRACE(op_kind_name(op.kind));
    const Case c = random_case(g, op, rng);
    check_whole_box(g, op, c.ip, c.want, true);
    for (bool acc : {false, true})
      EXPECT_LT(testing::max_rel_diff(run_pieces(g, op, c.in, rng, acc, pieces_served), c.want),
                1e-4)
          << "pieces, accumulate " << acc;
    ++checked;
  }
  return checked;
}

TEST(Conv1x1Kernels, ProductsMatchTheDirectLoopsOnRandomShapesAndTiles) {
  std::mt19937 rng(161);
  int checked = 0, pieces_served = 0;
  for (int round = 0; round < 24; ++round) {
    const Shape s = random_shape(rng);
    SCOPED_TRACE(label(round, s));
    Graph g = conv_graph(s);
    for (const Op& op : g.ops()) {
      if (!is_conv(op.kind)) continue;
      SCOPED_TRACE(op_kind_name(op.kind));
      const Case c = random_case(g, op, rng);
      const auto& [in, ip, want] = c;
      check_whole_box(g, op, ip, want, false);
      if (op.kind == OpKind::kConv2d) {  // weights marked unchanged: left to oneDNN's kept copy
        kernels::KernelOptions ko;
        ko.unchanged_inputs = 2;
        Tensor got(g.type(op.results[0].value));
        const int64_t before = kernels::conv1x1_calls();
        EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&got}, ko).ok());
        EXPECT_EQ(kernels::conv1x1_calls(), before) << "unchanged weights took the products";
        EXPECT_LT(testing::max_rel_diff(got, want), 1e-4) << "unchanged weights";
        kernels::KernelOptions repeat;  // a forward-only loop's first call: oneDNN's too
        repeat.feeds_repeat = true;
        Tensor first(g.type(op.results[0].value));
        EXPECT_TRUE(kernels::run(op, op.space.box(), ip, {&first}, repeat).ok());
        EXPECT_EQ(kernels::conv1x1_calls(), before) << "a repeating forward took the products";
        EXPECT_LT(testing::max_rel_diff(first, want), 1e-4) << "repeating feeds";
      }
      for (bool acc : {false, true})
        EXPECT_LT(testing::max_rel_diff(run_pieces(g, op, in, rng, acc, &pieces_served), want),
                  1e-4)
            << "pieces, accumulate " << acc;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 72);
  EXPECT_GT(pieces_served, 72);  // most pieces span whole rows
}

// The batch-packed products (planes of up to 16 output points and 256 or more outputs, 64 for the
// weight gradient, and strided 1x1 convolutions such as ResNet's downsampling ones): channels up
// to 70 and outputs up to 70 or 256-280 (row blocks of 16 and remainders split over
// 2 threads), batch up to 5, planes 1x1 to 15x15 at strides 1 to 3, against the direct loops on
// the whole box (twice: bitwise repeatable) and on random pieces over tiles, overwriting and
// accumulating.
TEST(Conv1x1Kernels, BatchPackedProductsMatchTheDirectLoops) {
  std::mt19937 rng(163);
  const int64_t planes[] = {1, 2, 3, 4, 7, 8, 15};
  int checked = 0, pieces_served = 0;
  for (int round = 0; round < 16; ++round) {
    // Outputs from 256 (where unstrided small planes take the packed products) in odd rounds.
    const Shape s{pick(rng, 1, 5), pick(rng, 1, 70),
                  round % 2 ? pick(rng, 256, 280) : pick(rng, 1, 70), planes[pick(rng, 0, 6)],
                  planes[pick(rng, 0, 6)]};
    const int64_t sh = round % 3 == 0 ? 1 : pick(rng, 1, 3),
                  sw = round % 3 == 0 ? 1 : pick(rng, 1, 3);
    SCOPED_TRACE(label(round, s) + " strides " + std::to_string(sh) + "x" + std::to_string(sw));
    Graph g = conv_graph(s, sh, sw);
    checked += check_convs(g, rng, &pieces_served);
  }
  EXPECT_EQ(checked, 48);
  EXPECT_GT(pieces_served, 48);
}

// Windows larger than 1x1 on small planes (up to 16 output points, 256 or more outputs, as
// ResNet-50's 3x3 convolutions on its 4x4 and 2x2 maps) as one product over im2col columns: 2x2 and
// 3x3 taps, padding 0-2, strides 1-2, dilation 1-2, against the direct loops on the whole box,
// bitwise repeatable, accumulated, and on random pieces.
TEST(Conv1x1Kernels, SmallPlanesWithLargerWindowsMatchTheDirectLoops) {
  std::mt19937 rng(164);
  int checked = 0, pieces_served = 0;
  for (int round = 0; round < 16; ++round) {
    const int64_t taps = pick(rng, 2, 3), sh = pick(rng, 1, 2), sw = pick(rng, 1, 2);
    Conv2dOptions co;
    co.padding = {pick(rng, 0, 2), pick(rng, 0, 2)};
    co.dilation = {pick(rng, 1, 2), 1};
    const int64_t reach = co.dilation[0] * (taps - 1) + 1;
    // Planes whose output has at most 4 x 4 points.
    const int64_t hlo = std::max<int64_t>(1, reach - 2 * co.padding[0]),
                  wlo = std::max<int64_t>(1, taps - 2 * co.padding[1]);
    const int64_t H = pick(rng, hlo, hlo + 3 * sh), W = pick(rng, wlo, wlo + 3 * sw);
    const Shape s{pick(rng, 1, 3), pick(rng, 1, 24), pick(rng, 256, 270), H, W};
    SCOPED_TRACE(label(round, s) + " taps " + std::to_string(taps) + " strides " +
                 std::to_string(sh) + "x" + std::to_string(sw) + " padding " +
                 std::to_string(co.padding[0]) + "," + std::to_string(co.padding[1]));
    Graph g = conv_graph(s, sh, sw, taps, co);
    const int64_t OH = (H + 2 * co.padding[0] - reach) / sh + 1,
                  OW = (W + 2 * co.padding[1] - taps) / sw + 1;
    if (OH * OW > 16) continue;
    checked += check_convs(g, rng, &pieces_served);
  }
  EXPECT_GE(checked, 30);
  EXPECT_GT(pieces_served, 0);
}

// conv2d + bias (reshaped, as the ONNX import writes it) + ReLU, run as one fused chain: the
// products apply the epilogue per image; against the reference op by op.
TEST(Conv1x1Kernels, FusedBiasAndReluMatchTheReference) {
  std::mt19937 rng(162);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Shape s = random_shape(rng);
    Graph g("conv1x1_bias_relu");
    Ops ops(g);
    ValueId y = ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{s.N, s.C, s.H, s.W})),
                           ops.param("w", TensorType(DType::kF32, IVec{s.K, s.C, 1, 1})));
    y = ops.add(y, ops.reshape(ops.param("b", TensorType(DType::kF32, IVec{s.K})), {s.K, 1, 1}));
    ops.output(ops.relu(y));
    ASSERT_TRUE(ops.status().ok());
    std::vector<Tensor> vals;
    for (ValueId v = 0; v < g.num_values(); ++v)
      vals.push_back(testing::random_tensor(g.type(v), rng, -2.0, 2.0));
    const std::vector<Tensor> want = testing::run_reference(g, vals);
    std::vector<Tensor> got = vals;
    std::vector<kernels::BoundCall> calls;
    std::vector<ValueId> temporaries;
    for (const Op& op : g.ops()) {
      got[op.results[0].value].fill(1e6);
      kernels::BoundCall c{&op, op.space.box(), {}, {&got[op.results[0].value]}};
      for (const auto& x : op.inputs) c.ins.push_back(&got[x.value]);
      calls.push_back(std::move(c));
      if (op.results[0].value != g.outputs()[0]) temporaries.push_back(op.results[0].value);
    }
    kernels::KernelOptions ko;
    ko.threads = static_cast<int>(pick(rng, 1, 2));
    ko.grain = 1;
    const int64_t before = kernels::conv1x1_calls();
    ASSERT_TRUE(kernels::run_chain_into(calls, temporaries, ko).ok());
    EXPECT_EQ(kernels::conv1x1_calls(), before + 1) << "the 1x1 path did not take the chain";
    const ValueId out = g.outputs()[0];
    EXPECT_LT(testing::max_rel_diff(got[out], want[out]), 1e-4);
    EXPECT_EQ(got[g.op(0).results[0].value].f32()[0], 1e6f) << "the conv's own value was written";
  }
}

}  // namespace
}  // namespace heddle
