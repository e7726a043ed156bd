// Property tests of contractions fused with the adds after them (a linear layer's bias, then a
// residual; run_chain_into through KernelGemmEpilogue.cpp): random einsums (plain, with a
// transposed weight, batched over heads with strided operands) followed by random runs of adds of
// broadcast and full operands in either order, sometimes ending in an op the fusion does not
// take, on the whole box and on pieces of the parallel dims, against the reference loops op by
// op.
#include <gtest/gtest.h>

#include <cmath>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A random einsum and adds after it; *fusable: how many adds precede the first op the fusion
// does not take (it takes at most two).
Graph random_graph(std::mt19937& rng, int* fusable) {
  Graph g("gemm_epilogue");
  Ops ops(g);
  int64_t B = pick(rng, 1, 3), Q = pick(rng, 1, 9), M = pick(rng, 1, 7), K = pick(rng, 1, 9);
  ValueId y = kNoValue;
  switch (pick(rng, 0, 2)) {
    case 0:
      y = ops.einsum("bqm,mk->bqk", ops.param("a", f32({B, Q, M})), ops.param("w", f32({M, K})));
      break;
    case 1:  // a transposed weight (the backward's dx = dy w^T)
      y = ops.einsum("bqm,km->bqk", ops.param("a", f32({B, Q, M})), ops.param("w", f32({K, M})));
      break;
    default: {  // attention's scores: batched over heads, operands strided
      int64_t H = pick(rng, 1, 3);
      y = ops.einsum("bqhm,bkhm->bhqk", ops.param("q", f32({B, Q, H, M})),
                     ops.param("k", f32({B, K, H, M})));
      break;
    }
  }
  const IVec shape = g.type(y).shape();
  const int64_t r = shape.size();
  *fusable = 0;
  bool open = true;
  for (int64_t i = pick(rng, 1, 4); i > 0; --i) {
    std::vector<int64_t> s(shape.values());
    ValueId x = kNoValue;
    switch (pick(rng, 0, 4)) {
      case 0:  // a bias along the last dim
        x = ops.param("bias" + std::to_string(g.num_values()), f32({shape[r - 1]}));
        break;
      case 1:  // broadcast along some dims
        for (auto& e : s)
          if (pick(rng, 0, 1) == 0) e = 1;
        x = ops.param("p" + std::to_string(g.num_values()), f32(s));
        break;
      case 2:  // a residual of the result's shape
        x = ops.param("r" + std::to_string(g.num_values()), f32(s));
        break;
      case 3:  // not an add: not taken, and neither is anything after it
        y = ops.gelu(y);
        open = false;
        continue;
      default:  // an add of the chain's value to itself: not taken
        y = ops.add(y, y);
        open = false;
        continue;
    }
    y = pick(rng, 0, 1) == 0 ? ops.add(y, x) : ops.add(x, y);
    if (open && *fusable < 2) ++*fusable;
  }
  ops.output(y);
  EXPECT_TRUE(ops.status().ok());
  return g;
}

// Every op over its share of einsum box `piece` (a box of its parallel dims, all of the sum
// dims): the einsum's result image for the ops after it.
Box box_for(const Graph& g, const Op& op, const Box& piece) {
  const Op& mm = g.op(0);
  return &op == &mm ? piece : mm.results[0].proj.image(piece);
}

// Runs the chain over `piece` as run_chain_into would in an executor (testing::run_chain_tiles).
Tensor run_fused(const Graph& g, const std::vector<Tensor>& params, const Box& piece, int threads,
                 bool* mm_written) {
  return testing::run_chain_tiles(
      g, params, [&](const Op& op) { return box_for(g, op, piece); }, threads, mm_written);
}

TEST(GemmEpilogue, FusedContractionsAndAddsMatchTheReferenceOpByOp) {
  std::mt19937 rng(16);
  int fused = 0, rounds = 400;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fusable = 0;
    Graph g = random_graph(rng, &fusable);
    std::vector<Tensor> params;
    for (ValueId v = 0; v < g.num_values(); ++v)
      params.push_back(testing::random_tensor(g.type(v), rng, -2.0, 2.0));
    std::vector<Tensor> want = testing::reference_values(g, params);
    const Tensor& y = want[g.outputs()[0]];
    const Op& mm = g.op(0);
    Box whole = mm.space.box();
    bool written = false;
    Tensor got = run_fused(g, params, whole, static_cast<int>(pick(rng, 1, 2)), &written);
    EXPECT_LT(testing::max_rel_diff(got, y.crop(got.region())), 1e-4) << "whole box";
    EXPECT_EQ(written, fusable == 0) << "fusable adds " << fusable << "\n" << print_graph(g);
    fused += !written;
    // A piece of the parallel dims; the sum dims stay whole.
    std::vector<int64_t> lo(whole.start().values()), hi(whole.end().values());
    for (int64_t d = 0; d < whole.rank(); ++d) {
      if (mm.space.dim(d).reduce) continue;
      lo[d] = pick(rng, whole.start()[d], whole.end()[d] - 1);
      hi[d] = pick(rng, lo[d] + 1, whole.end()[d]);
    }
    Box piece{IVec(lo), IVec(hi)};
    Tensor part = run_fused(g, params, piece, static_cast<int>(pick(rng, 1, 2)), &written);
    EXPECT_LT(testing::max_rel_diff(part, y.crop(part.region())), 1e-4)
        << "piece " << piece.to_string();
  }
  EXPECT_GT(fused, rounds / 2);
}

}  // namespace
}  // namespace heddle
