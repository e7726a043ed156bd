// General slicing (issue #23, docs/sharding.md "Any range from any owner"): index sums, reversals,
// strides, halos as large as a block or larger, and extents the mesh does not divide are split,
// lowered, run on threads and compared with the single-device interpreter: the fixtures in
// examples/slicing under propagation, and generated graphs with random affine projections under
// random strategies on random meshes (most of which divide none of their extents).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/RandomAffine.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Propagate.h"

namespace heddle {
namespace {

// Runs `plan` on threads with interpreter inputs; true when every output is within 1e-5 of the
// interpreter's (the ops here are sums of a few tanh values).
::testing::AssertionResult matches_reference(const Graph& g, const ShardingPlan& plan,
                                             uint64_t seed) {
  std::vector<Tensor> inputs = random_inputs(g, seed, 4);
  Interpreter interp(g);
  auto want = interp.run(inputs);
  if (!want.ok()) return ::testing::AssertionFailure() << want.error().to_string();
  TensorMap feeds;
  for (size_t k = 0; k < inputs.size(); ++k) feeds.emplace(g.inputs()[k], inputs[k]);
  auto progs = lower(g, plan);
  if (!progs.ok()) return ::testing::AssertionFailure() << progs.error().to_string();
  auto got = run_threaded(g, *progs, feeds);
  if (!got.ok()) return ::testing::AssertionFailure() << got.error().to_string();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Tensor& w = (*want)[k];
    const Tensor& r = got->at(g.outputs()[k]);
    if (w.region() != r.region())
      return ::testing::AssertionFailure() << "region " << r.region().to_string();
    for (int64_t i = 0; i < w.numel(); ++i)
      if (std::fabs(w.f32()[i] - r.f32()[i]) > 1e-5)
        return ::testing::AssertionFailure()
               << "output " << k << " element " << i << ": " << r.f32()[i] << " vs " << w.f32()[i];
  }
  return ::testing::AssertionSuccess();
}

Graph fixture(const std::string& name) {
  auto g = parse_graph_file(std::string(HEDDLE_SOURCE_DIR) + "/examples/slicing/" + name);
  HEDDLE_ASSERT(g.ok()) << g.error().to_string();
  return std::move(*g);
}

// The strategy propagation gives the op defining `value`.
OpStrategy strategy_of(const Graph& g, const ShardingPlan& plan, const std::string& value) {
  for (OpId i = 0; i < g.num_ops(); ++i)
    if (g.value(g.op(i).results[0].value).name == value) return plan.ops[i];
  ADD_FAILURE() << "no op defines %" << value;
  return {};
}

struct FixtureCase {
  const char* file;
  const char* mesh;
  const char* value;  // the op of general form that must be split
};

TEST(GeneralSlice, FixturesAreSplitByPropagationAndMatchTheReference) {
  const FixtureCase cases[] = {
      {"stencil_sum.hd", "4", "s"}, {"stencil_sum.hd", "3", "s"}, {"stencil_sum.hd", "6", "s"},
      {"reversal.hd", "4", "r"},    {"reversal.hd", "3", "r"},    {"reversal.hd", "6", "r"},
      {"wide_halo.hd", "8", "m"},   {"wide_halo.hd", "8", "s"},   {"wide_halo.hd", "6", "m"},
  };
  for (const auto& c : cases) {
    Graph g = fixture(c.file);
    Mesh mesh = *Mesh::parse(c.mesh);
    auto p = propagate(g, mesh, {});
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    OpStrategy s = strategy_of(g, p->plan, c.value);
    EXPECT_NE(s, OpStrategy::replicated(mesh.rank()))
        << c.file << " on " << c.mesh << ": %" << c.value << " left replicated\n"
        << p->plan.to_string(g);
    EXPECT_TRUE(matches_reference(g, p->plan, 7)) << c.file << " on " << c.mesh;
  }
}

TEST(GeneralSlice, ReversalFetchesTheMirroredBlockFromItsOwner) {
  Graph g = fixture("reversal.hd");
  Mesh mesh = *Mesh::parse("4");
  OpId rev = 1;
  auto pl = derive_placements(g, rev, mesh, OpStrategy({0}));
  ASSERT_TRUE(pl.ok()) << pl.error().to_string();
  EXPECT_EQ(pl->inputs[0].sharding.to_string(), "[Shard(0)]");
  // Device 0 reads [3072:4096], 1,024 elements above its block; device 3 as many below.
  EXPECT_EQ(pl->inputs[0].halo_lo, IVec{1024});
  EXPECT_EQ(pl->inputs[0].halo_hi, IVec{1024});
  ShardingPlan plan = ShardingPlan::replicated(g, mesh);
  for (OpId i = 0; i < g.num_ops(); ++i) plan.ops[i] = OpStrategy({0});
  auto progs = lower(g, plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  EXPECT_NE((*progs)[0].to_string(g, mesh).find("fetch %a group {0,1,2,3} -> [3072:4096]"),
            std::string::npos)
      << (*progs)[0].to_string(g, mesh);
  EXPECT_TRUE(matches_reference(g, plan, 3));
}

TEST(GeneralSlice, UnevenBlocksThatDoNotNestAreRefused) {
  // 10 rows cut 2 x 3: blocks of 5 on the first axis, of 2 on both; [4:6] straddles two.
  Graph g = *parse_graph(
      "graph g {\n input %x: f32[10]\n %y: f32[10] = tanh [i=10] %x(i) -> (i)\n output %y\n}");
  auto r = derive_placements(g, 0, *Mesh::parse("a=2,b=3"), OpStrategy({0, 0}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("do not nest"), std::string::npos) << r.error().message;
  // 12 rows cut 2 x 3 nest (6 and 2), and so do 10 rows on 2 x 5 (5 and 1).
  EXPECT_TRUE(derive_placements(g, 0, *Mesh::parse("a=2,b=5"), OpStrategy({0, 0})).ok());
}

// Generated graphs: random affine projections (sums, negative coefficients, strides, offsets) on
// random meshes, most of which divide none of the extents; every valid strategy of the affine op
// is tried (the others at random), lowered, run and compared.
TEST(GeneralSlice, RandomAffineProjectionsOnRandomMeshesMatchTheReference) {
  const char* meshes[] = {"2", "3", "4", "5", "6", "7", "8", "2x3", "a=3,b=2", "2x2"};
  std::mt19937_64 rng(23);
  int64_t cases = 0, split = 0, uneven = 0, far = 0, reversed = 0;
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    Graph g = testing::random_affine_graph(seed);
    ASSERT_TRUE(verify(g).empty()) << testing::random_affine_text(seed);
    Mesh mesh = *Mesh::parse(meshes[rng() % 10]);
    const OpId affine = 1;
    for (const OpStrategy& s : enumerate_strategies(g, affine, mesh)) {
      ShardingPlan plan = ShardingPlan::replicated(g, mesh);
      for (OpId i = 0; i < g.num_ops(); ++i) {
        auto all = enumerate_strategies(g, i, mesh);
        plan.ops[i] = all[rng() % all.size()];
      }
      plan.ops[affine] = s;
      ASSERT_TRUE(matches_reference(g, plan, seed))
          << testing::random_affine_text(seed) << "mesh " << mesh.to_string() << "\n"
          << plan.to_string(g);
      ++cases;
      if (s == OpStrategy::replicated(mesh.rank())) continue;
      ++split;
      const Op& op = g.op(affine);
      auto pl = derive_placements(g, affine, mesh, s);
      const IVec& shape = g.type(op.inputs[0].value).shape();
      for (int64_t d = 0; d < shape.size(); ++d) {
        int64_t n = pl->inputs[0].sharding.shards_of_dim(d, mesh);
        if (n == 1) continue;
        uneven += shape[d] % n != 0;
        int64_t block = (shape[d] + n - 1) / n;
        far += std::max(pl->inputs[0].halo_lo[d], pl->inputs[0].halo_hi[d]) >= block;
        for (int64_t a = 0; a < mesh.rank(); ++a)
          if (s.dim(a) >= 0) reversed += op.inputs[0].proj.map().at(d, s.dim(a)) < 0;
      }
    }
  }
  // The generator must exercise what the old rules refused, not only plain splits.
  EXPECT_GT(cases, 400);
  EXPECT_GT(split, 200);
  EXPECT_GT(uneven, 100);
  EXPECT_GT(far, 30);
  EXPECT_GT(reversed, 50);
}

}  // namespace
}  // namespace heddle
