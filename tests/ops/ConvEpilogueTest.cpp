// Property tests of convolutions fused with their epilogue (oneDNN post-ops, run by
// run_chain_into for a chain that starts with a conv2d): random convolutions (plain, grouped,
// depthwise) followed by random runs of bias adds, per-channel scales, ReLU, clips, sigmoid and
// SiLU, sometimes ending in an op the fusion does not take, on the whole box and on pieces of the
// parallel dims, against the reference loops op by op.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "OpsTestUtil.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

constexpr float kUnwritten = 1e6f;

// The largest difference of two tiles of one region, relative to the reference's magnitude.
double max_diff(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.region(), want.region());
  double m = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    m = std::max(m, std::abs(double(got.f32()[i]) - want.f32()[i]) /
                        std::max(1.0, std::abs(double(want.f32()[i]))));
  return m;
}

// A random convolution (or, with `cat`, a concat along the channels) and epilogue; *fusable: how
// many epilogue steps precede the first one the fusion does not take.
Graph random_graph(std::mt19937& rng, int* fusable, bool cat) {
  Graph g("conv_epilogue");
  Ops ops(g);
  int64_t form = pick(rng, 0, 2), G = 1, cig = pick(rng, 1, 6), cog = pick(rng, 1, 6);
  if (form == 1) G = pick(rng, 2, 3);
  if (form == 2) {
    G = pick(rng, 2, 8);
    cig = cog = 1;
  }
  Conv2dOptions o;
  int64_t k = pick(rng, 1, 3), H = pick(rng, k, 9), W = pick(rng, k, 9);
  o.stride = {pick(rng, 1, 2), pick(rng, 1, 2)};
  o.padding = {pick(rng, 0, k - 1), pick(rng, 0, k - 1), pick(rng, 0, k - 1), pick(rng, 0, k - 1)};
  o.groups = G;
  int64_t C = G * cog;
  ValueId y = kNoValue;
  if (cat) {
    std::vector<ValueId> xs;
    int64_t n = pick(rng, 1, 3);
    C = 0;
    for (int64_t i = pick(rng, 1, 4); i > 0; --i) {
      int64_t c = pick(rng, 1, 5);
      C += c;
      xs.push_back(ops.param("c" + std::to_string(i), TensorType(DType::kF32, IVec{n, c, H, W})));
    }
    y = ops.concat(xs, 1);
  } else {
    y = ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{pick(rng, 1, 3), G * cig, H, W})),
                   ops.param("w", TensorType(DType::kF32, IVec{C, cig, k, k})), o);
  }
  auto channel = [&](const char* name) {
    return ops.param(name + std::to_string(g.num_values()), TensorType(DType::kF32, IVec{C, 1, 1}));
  };
  auto scalar = [&] {
    return ops.param("s" + std::to_string(g.num_values()), TensorType(DType::kF32, IVec{}));
  };
  *fusable = 0;
  bool open = true;
  for (int64_t n = pick(rng, 1, 4); n > 0; --n) {
    switch (pick(rng, 0, 7)) {
      case 0:  // a bias as the ONNX import writes it
        y = ops.add(y, ops.reshape(ops.param("b" + std::to_string(g.num_values()),
                                             TensorType(DType::kF32, IVec{C})),
                                   {C, 1, 1}));
        break;
      case 1:
        y = pick(rng, 0, 1) ? ops.mul(y, channel("m")) : ops.mul(channel("m"), y);
        break;
      case 2:
        y = ops.relu(y);
        break;
      case 3:
        y = ops.binary(OpKind::kMinimum, ops.binary(OpKind::kMaximum, y, scalar()), scalar());
        if (open) ++*fusable;  // two steps
        break;
      case 4:
        y = ops.unary(OpKind::kSigmoid, y);
        break;
      case 5:
        y = ops.mul(y, ops.unary(OpKind::kSigmoid, y));
        break;
      case 6:
        y = ops.add(y, channel("a"));
        break;
      default:  // a residual: not taken, and neither is anything after it
        y = ops.add(y, ops.param("r" + std::to_string(g.num_values()), g.type(y)));
        open = false;
        break;
    }
    if (open) ++*fusable;
  }
  ops.output(y);
  EXPECT_TRUE(ops.status().ok());
  return g;
}

// Every op of `g` over its share of conv box `piece` (a box of the conv's parallel dims, all of
// ci): the conv's result image for elementwise ops, its channels for the bias reshape.
Box box_for(const Graph& g, const Op& op, const Box& piece) {
  const Op& conv = g.op(0);
  Box region = conv.results[0].proj.image(piece);
  if (&op == &conv) return piece;
  if (op.kind == OpKind::kReshape)
    return op.space.box().rank() == 0 ? op.space.box()
                                      : Box(IVec{region.start()[1]}, IVec{region.end()[1]});
  return region;
}

// Runs the chain over `piece` as run_chain_into would in an executor: one tile per result
// (left at kUnwritten), inputs whole. Returns the last result's tile and, in *conv_written,
// whether the conv's own tile was written.
Tensor run_fused(const Graph& g, const std::vector<Tensor>& params, const Box& piece, int threads,
                 bool* conv_written) {
  std::map<ValueId, Tensor> tiles;
  std::vector<kernels::BoundCall> calls;
  std::vector<ValueId> temporaries;
  for (const Op& op : g.ops()) {
    Box b = box_for(g, op, piece);
    Tensor t = Tensor::tile(DType::kF32, op.results[0].proj.image(b));
    t.fill(kUnwritten);
    tiles.emplace(op.results[0].value, std::move(t));
  }
  for (const Op& op : g.ops()) {
    kernels::BoundCall c{&op, box_for(g, op, piece), {}, {&tiles.at(op.results[0].value)}};
    for (const auto& x : op.inputs)
      c.ins.push_back(tiles.count(x.value) ? &tiles.at(x.value) : &params[x.value]);
    calls.push_back(std::move(c));
    if (op.results[0].value != g.outputs()[0]) temporaries.push_back(op.results[0].value);
  }
  kernels::KernelOptions ko;
  ko.threads = threads;
  EXPECT_TRUE(kernels::run_chain_into(calls, temporaries, ko).ok());
  const Tensor& conv = tiles.at(g.op(0).results[0].value);
  *conv_written = conv.numel() > 0 && conv.f32()[0] != kUnwritten;
  return tiles.at(g.outputs()[0]);
}

// Convolutions (rounds 0, 2, ...) and channel concats (1, 3, ...).
TEST(ConvEpilogue, FusedConvolutionsAndConcatsMatchTheReferenceOpByOp) {
  std::mt19937 rng(20);
  int fused = 0, rounds = 400;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fusable = 0;
    Graph g = random_graph(rng, &fusable, round % 2 == 1);
    // Params random (values indexed by ValueId; results get their tiles in run_fused).
    std::vector<Tensor> params;
    for (ValueId v = 0; v < g.num_values(); ++v)
      params.push_back(testing::random_tensor(g.type(v), rng, -2.0, 2.0));
    // The reference, op by op.
    const std::vector<Tensor> want = testing::run_reference(g, params);
    const Tensor& y = want[g.outputs()[0]];
    const Op& conv = g.op(0);
    Box whole = conv.space.box();
    bool written = false;
    Tensor got = run_fused(g, params, whole, static_cast<int>(pick(rng, 1, 2)), &written);
    EXPECT_LT(max_diff(got, y.crop(got.region())), 1e-4) << "whole box";
    EXPECT_EQ(written, fusable == 0) << "fusable steps " << fusable << "\n" << print_graph(g);
    fused += !written;
    // A piece of the parallel dims (the reduce dim ci stays whole, and so do the group and
    // channel dims of a grouped conv, whose image of a piece would hold channels between groups
    // that it does not compute).
    std::vector<int64_t> lo(whole.start().values()), hi(whole.end().values());
    for (int64_t d = 0; d + 1 < whole.rank(); ++d) {
      if (whole.rank() == 6 && (d == 1 || d == 2)) continue;
      lo[d] = pick(rng, whole.start()[d], whole.end()[d] - 1);
      hi[d] = pick(rng, lo[d] + 1, whole.end()[d]);
    }
    Box piece{IVec(lo), IVec(hi)};
    Tensor part = run_fused(g, params, piece, 1, &written);
    EXPECT_LT(max_diff(part, y.crop(part.region())), 1e-4) << "piece " << piece.to_string();
  }
  EXPECT_GT(fused, rounds / 2);
}

// Convolutions oneDNN's AVX2 jit kernels do not take, which it runs through its im2col + gemm
// path: a few input channels under large strided windows (AlexNet's first layer) and groups of
// 2 to 4 channels (ResNeXt's), with a bias and a ReLU or a per-channel scale after them. There
// the epilogue runs as own loops after the convolution (oneDNN's gemm path applies binary
// post-ops element by element); the chain is still taken whole and matches the reference.
TEST(ConvEpilogue, ConvolutionsOnOneDnnsGemmPathMatchTheReference) {
  std::mt19937 rng(41);
  for (int round = 0; round < 24; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("gemm_path");
    Ops ops(g);
    const bool grouped = round % 2 == 1;
    const int64_t G = grouped ? pick(rng, 2, 4) : 1,
                  cig = grouped ? pick(rng, 2, 4) : pick(rng, 1, 3),
                  cog = grouped ? pick(rng, 2, 4) : pick(rng, 4, 12),
                  k = grouped ? 3 : pick(rng, 5, 11);
    Conv2dOptions o;
    const int64_t s = grouped ? 1 : pick(rng, 2, 4), p = pick(rng, 0, k / 2);
    o.stride = {s, s};
    o.padding = {p, p, p, p};
    o.groups = G;
    const int64_t H = pick(rng, k, k + 12), W = pick(rng, k, k + 12), C = G * cog;
    ValueId y =
        ops.conv2d(ops.param("x", TensorType(DType::kF32, IVec{pick(rng, 1, 2), G * cig, H, W})),
                   ops.param("w", TensorType(DType::kF32, IVec{C, cig, k, k})), o);
    y = ops.add(y, ops.reshape(ops.param("b", TensorType(DType::kF32, IVec{C})), {C, 1, 1}));
    y = round % 4 < 2 ? ops.relu(y)
                      : ops.mul(y, ops.param("m", TensorType(DType::kF32, IVec{C, 1, 1})));
    ops.output(y);
    ASSERT_TRUE(ops.status().ok());
    std::vector<Tensor> params;
    for (ValueId v = 0; v < g.num_values(); ++v)
      params.push_back(testing::random_tensor(g.type(v), rng, -2.0, 2.0));
    const std::vector<Tensor> want = testing::run_reference(g, params);
    const Tensor& ref = want[g.outputs()[0]];
    for (int threads : {1, 2}) {
      bool written = true;
      Tensor got = run_fused(g, params, g.op(0).space.box(), threads, &written);
      EXPECT_LT(max_diff(got, ref.crop(got.region())), 1e-4) << "threads " << threads;
      EXPECT_FALSE(written) << "the chain ran unfused\n" << print_graph(g);
    }
  }
}

}  // namespace
}  // namespace heddle
