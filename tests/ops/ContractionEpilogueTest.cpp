// Property tests of einsums fused with the adds after them (run_chain_into's einsum epilogue,
// KernelContractionEpilogue.cpp): random products (plain, transposed operands or result, batched,
// linear layers over [b, s, k]) followed by random runs of adds (a bias broadcast over the rows, a
// residual, a scalar, on either side), sometimes ending in an op the fusion does not take, on the
// whole box and on pieces of the parallel dims, against the reference loops op by op.
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

// A random einsum and the ops after it; *fusable: how many adds precede the first op the fusion
// does not take.
Graph random_graph(std::mt19937& rng, int* fusable) {
  Graph g("einsum_epilogue");
  Ops ops(g);
  const int64_t m = pick(rng, 1, 40), n = pick(rng, 1, 40), k = pick(rng, 1, 40);
  const int64_t b = pick(rng, 1, 3), s = pick(rng, 1, 9);
  auto param = [&](const char* name, IVec shape) {
    return ops.param(name + std::to_string(g.num_values()), TensorType(DType::kF32, shape));
  };
  ValueId y = kNoValue;
  switch (pick(rng, 0, 5)) {
    case 0:
      y = ops.einsum("mk,kn->mn", param("a", IVec{m, k}), param("w", IVec{k, n}));
      break;
    case 1:  // B transposed (a linear layer's input gradient)
      y = ops.einsum("mk,nk->mn", param("a", IVec{m, k}), param("w", IVec{n, k}));
      break;
    case 2:  // A transposed (a weight gradient)
      y = ops.einsum("km,kn->mn", param("a", IVec{k, m}), param("w", IVec{k, n}));
      break;
    case 3:  // the result transposed
      y = ops.einsum("mk,kn->nm", param("a", IVec{m, k}), param("w", IVec{k, n}));
      break;
    case 4:  // batched
      y = ops.einsum("bmk,bkn->bmn", param("a", IVec{b, m, k}), param("w", IVec{b, k, n}));
      break;
    default:  // a linear layer over [b, s, k]
      y = ops.linear(param("x", IVec{b, s, k}), param("w", IVec{k, n}));
      break;
  }
  const IVec shape = g.type(y).shape();
  const int64_t last = shape[shape.size() - 1];
  *fusable = 0;
  bool open = true;
  for (int64_t q = pick(rng, 1, 3); q > 0; --q) {
    ValueId x = kNoValue;
    switch (pick(rng, 0, 4)) {
      case 0:
        x = param("bias", IVec{last});
        break;
      case 1:
        x = param("r", shape);
        break;
      case 2:
        x = param("s", IVec{});
        break;
      case 3:  // not taken, and neither is anything after it
        y = ops.relu(y);
        open = false;
        continue;
      default:
        y = ops.mul(y, param("m", IVec{last}));
        open = false;
        continue;
    }
    y = pick(rng, 0, 1) ? ops.add(y, x) : ops.add(x, y);
    if (open) ++*fusable;
  }
  ops.output(y);
  EXPECT_TRUE(ops.status().ok());
  return g;
}

// Every op of `g` over its share of einsum box `piece` (a box of its parallel dims, the summed
// dims whole): the einsum's result image for the elementwise ops.
Box box_for(const Graph& g, const Op& op, const Box& piece) {
  const Op& mm = g.op(0);
  return &op == &mm ? piece : mm.results[0].proj.image(piece);
}

TEST(ContractionEpilogue, FusedProductsMatchTheReferenceOpByOp) {
  std::mt19937 rng(27);
  int fused = 0, rounds = 400;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fusable = 0;
    Graph g = random_graph(rng, &fusable);
    std::vector<Tensor> params;
    for (ValueId v = 0; v < g.num_values(); ++v)
      params.push_back(testing::random_tensor(g.type(v), rng, -2.0, 2.0));
    const std::vector<Tensor> want = testing::run_reference(g, params);
    const Tensor& y = want[g.outputs()[0]];
    const Op& mm = g.op(0);
    Box whole = mm.space.box();
    bool written = false;
    auto box_of = [&](const Box& piece) {
      return [&g, piece](const Op& op) { return box_for(g, op, piece); };
    };
    Tensor got = testing::run_chain_tiles(g, params, box_of(whole),
                                          static_cast<int>(pick(rng, 1, 2)), &written);
    EXPECT_LT(testing::max_rel_diff(got, y.crop(got.region())), 1e-4) << "whole box\n"
                                                                      << print_graph(g);
    EXPECT_EQ(written, fusable == 0) << "fusable adds " << fusable << "\n" << print_graph(g);
    fused += !written;
    // A piece of the parallel dims; the summed dims stay whole.
    std::vector<int64_t> lo(whole.start().values()), hi(whole.end().values());
    for (int64_t d = 0; d < whole.rank(); ++d) {
      if (mm.space.dim(d).reduce) continue;
      lo[d] = pick(rng, whole.start()[d], whole.end()[d] - 1);
      hi[d] = pick(rng, lo[d] + 1, whole.end()[d]);
    }
    Box piece{IVec(lo), IVec(hi)};
    Tensor part = testing::run_chain_tiles(g, params, box_of(piece),
                                           static_cast<int>(pick(rng, 1, 2)), &written);
    EXPECT_LT(testing::max_rel_diff(part, y.crop(part.region())), 1e-4)
        << "piece " << piece.to_string();
    EXPECT_EQ(written, fusable == 0) << "piece " << piece.to_string();
  }
  EXPECT_GT(fused, rounds / 2);
}

}  // namespace
}  // namespace heddle
