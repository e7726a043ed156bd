// derive_placements() checks only the shards that decide the outcome; the straightforward check
// of every shard (ShardCheck::kEvery) is the oracle: on generated graphs, on single windowed ops
// with random strides, offsets and padding, and on meshes of up to 1,024 devices, both give the
// same placements and halos, or the same diagnostic naming the same first failing shard.
#include <gtest/gtest.h>

#include <random>

#include "common/RandomGraph.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/sharding/OpStrategy.h"
#include "heddle/sharding/Propagate.h"

namespace heddle {
namespace {

// Every strategy of op `id` on `mesh` (not only the valid ones: the failures must agree too).
std::vector<OpStrategy> all_strategies(const Graph& g, OpId id, const Mesh& mesh) {
  std::vector<OpStrategy> out;
  std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
  int64_t rank = g.op(id).space.rank();
  while (true) {
    out.emplace_back(dims);
    int64_t a = mesh.rank() - 1;
    while (a >= 0 && ++dims[a] == rank) dims[a--] = -1;
    if (a < 0) return out;
  }
}

// Compares both checks on every strategy of every op; returns how many strategies were valid.
int64_t expect_same(const Graph& g, const Mesh& mesh) {
  int64_t valid = 0;
  for (OpId id = 0; id < g.num_ops(); ++id)
    for (const OpStrategy& s : all_strategies(g, id, mesh)) {
      auto fast = derive_placements(g, id, mesh, s);
      auto every = derive_placements(g, id, mesh, s, ShardCheck::kEvery);
      std::string where = g.name() + " op " + std::to_string(id) + " " +
                          s.to_string(g.op(id).space, mesh) + " on " + mesh.to_string();
      EXPECT_EQ(fast.ok(), every.ok()) << where;
      if (fast.ok() != every.ok()) continue;
      if (!fast.ok()) {
        EXPECT_EQ(fast.error().message, every.error().message) << where;
        continue;
      }
      EXPECT_TRUE(*fast == *every) << where;
      ++valid;
    }
  return valid;
}

TEST(ShardCheck, DecidingShardsAgreeWithEveryShardOnScaledRandomGraphs) {
  // Dims of 2..8 times 16..64: index dims split 64 to 1,024 ways, so most checks skip shards.
  const char* meshes[] = {"64", "128", "a=16,b=8", "a=4,b=64", "a=8,b=8,c=16", "1024", "a=3,b=64"};
  std::mt19937_64 rng(11);
  int64_t valid = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    int64_t scale = int64_t{16} << (rng() % 3);
    Graph g = testing::random_graph(10, seed, false, scale);
    valid += expect_same(g, *Mesh::parse(meshes[rng() % 7]));
  }
  EXPECT_GT(valid, 200);
}

// One op reading a padded 1-d tensor through a random strided, offset, windowed projection and
// writing its result forwards or backwards: halos, clipped edges, shards reading only padding,
// and shards reading beyond their neighbours, on random shard counts.
TEST(ShardCheck, DecidingShardsAgreeWithEveryShardOnRandomWindowedOps) {
  std::mt19937_64 rng(3);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t shards[] = {2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  int64_t valid = 0, graphs = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    int64_t n = shards[pick(0, 10)];
    int64_t e = n * pick(1, 6);  // index extent
    int64_t a = pick(-3, 3), c = pick(-8, 8), w = pick(1, 9);
    if (a == 0) a = 1;
    int64_t t = std::max<int64_t>(n * pick(1, 8), 1);  // tensor extent
    std::string proj = "(" + std::to_string(a) + "*i " + (c < 0 ? "- " : "+ ") +
                       std::to_string(std::abs(c)) + ")[" + std::to_string(w) + "]";
    std::string out = pick(0, 1) ? "(i)" : "(-i + " + std::to_string(e - 1) + ")";
    std::string text = "graph w" + std::to_string(trial) + " {\n input %x: f32[" +
                       std::to_string(t) + "]\n %y: f32[" + std::to_string(e) +
                       "] = relu [i=" + std::to_string(e) + "] %x" + proj + " padded -> " + out +
                       "\n output %y\n}\n";
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << text << g.error().to_string();
    if (!verify(*g).empty()) continue;
    ++graphs;
    valid += expect_same(*g, *Mesh::parse(std::to_string(n)));
  }
  EXPECT_GT(graphs, 1000);
  EXPECT_GT(valid, 300);
}

// Whole propagations agree: the plan, its reshards, on scaled random graphs and large meshes.
TEST(ShardCheck, PropagationIsTheSameWithEitherCheck) {
  const char* meshes[] = {"256", "a=32,b=8", "a=2,b=4,c=64"};
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Graph g = testing::random_graph(12, seed, false, 32);
    Mesh m = *Mesh::parse(meshes[seed % 3]);
    PropagateOptions every;
    every.shard_check = ShardCheck::kEvery;
    auto a = propagate(g, m, Pins{});
    auto b = propagate(g, m, Pins{}, every);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->plan == b->plan) << g.name();
    EXPECT_EQ(a->report(g), b->report(g)) << g.name();
  }
}

}  // namespace
}  // namespace heddle
