// The intra-op ILP: optimal against brute force on random strategy graphs and on tiny models,
// never worse than propagation, memory limits honoured, and its plans execute correctly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/RandomModel.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/search/IntraOp.h"
#include "heddle/sharding/Reshard.h"
#include "heddle/sharding/Tactics.h"

namespace heddle::search {
namespace {

StrategyGraph random_strategy_graph(std::mt19937_64& rng, int nodes) {
  std::uniform_real_distribution<double> u(0, 10);
  StrategyGraph sg;
  for (int v = 0; v < nodes; ++v) {
    StrategyGraph::Node n;
    int k = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < k; ++s) {
      n.cost.push_back(u(rng));
      n.memory.push_back(u(rng));
    }
    sg.nodes.push_back(n);
  }
  for (int v = 1; v < nodes; ++v)
    for (int w = 0; w < v; ++w) {
      if (rng() % 3 != 0) continue;
      StrategyGraph::Edge e;
      e.from = w;
      e.to = v;
      for (size_t i = 0; i < sg.nodes[w].cost.size() * sg.nodes[v].cost.size(); ++i)
        e.cost.push_back(rng() % 2 ? 0.0 : u(rng));
      sg.edges.push_back(e);
    }
  return sg;
}

// Every assignment, the cheapest within the memory limit (or none).
std::optional<double> brute_force(const StrategyGraph& sg) {
  std::vector<int> c(sg.nodes.size(), 0);
  std::optional<double> best;
  while (true) {
    auto [cost, memory] = sg.evaluate(c);
    if (memory <= sg.memory_limit + 1e-9 && (!best || cost < *best)) best = cost;
    size_t v = 0;
    while (v < c.size() && ++c[v] == static_cast<int>(sg.nodes[v].cost.size())) c[v++] = 0;
    if (v == c.size()) return best;
  }
}

TEST(StrategyGraph, IlpMatchesBruteForce) {
  std::mt19937_64 rng(42);
  CbcSolver cbc;
  int with_limit = 0;
  for (int trial = 0; trial < 150; ++trial) {
    StrategyGraph sg = random_strategy_graph(rng, 2 + trial % 6);
    if (trial % 2) {  // a limit between the smallest and the largest memory
      double lo = 0, hi = 0;
      for (const auto& n : sg.nodes) {
        lo += *std::min_element(n.memory.begin(), n.memory.end());
        hi += *std::max_element(n.memory.begin(), n.memory.end());
      }
      sg.memory_limit = lo + (hi - lo) * 0.3;
      ++with_limit;
    }
    auto want = brute_force(sg);
    auto got = solve_strategy_graph(sg, cbc);
    ASSERT_EQ(want.has_value(), got.ok()) << trial;
    if (!want) continue;
    EXPECT_TRUE(got->optimal);
    EXPECT_NEAR(got->cost, *want, 1e-6) << "trial " << trial;
    EXPECT_LE(got->memory, sg.memory_limit + 1e-6);
  }
  EXPECT_GT(with_limit, 50);
}

TEST(StrategyGraph, NothingFitsSaysTheMinimum) {
  StrategyGraph sg;
  sg.nodes.push_back({{1, 2}, {4096, 2048}});
  sg.nodes.push_back({{1}, {1024}});
  sg.memory_limit = 2048;
  auto r = solve_strategy_graph(sg, CbcSolver());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no plan fits in 2.00 KiB per device; the smallest needs 3.00 KiB");
}

// The estimate of a plan computed directly from its placements: compute divided by the devices
// sharing it, plus every reshard between producer and consumer placements.
double plan_seconds(const Graph& g, const ShardingPlan& plan, const IntraOpOptions& o) {
  BytesMovedCost cost;
  double t = 0;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const OpStrategy& s = plan.ops[id];
    double parallel = 1;
    for (int64_t a = 0; a < plan.mesh.rank(); ++a)
      if (s.dim(a) >= 0) parallel *= static_cast<double>(plan.mesh.size(a));
    t += op_flops(g, id) / parallel * o.seconds_per_flop;
    auto pl = *derive_placements(g, id, plan.mesh, s);
    const Op& op = g.op(id);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Value& v = g.value(op.inputs[i].value);
      std::optional<TensorSharding> from;
      if (v.role == ValueRole::kResult) {
        auto prod = *derive_placements(g, v.producer, plan.mesh, plan.ops[v.producer]);
        from = prod.results[v.result_index].sharding;
      } else if (plan.pinned.count(op.inputs[i].value)) {
        from = plan.pinned.at(op.inputs[i].value);
      }
      if (from)
        t += plan_reshard(v.type, plan.mesh, *from, pl.inputs[i].sharding, cost)->cost *
             o.seconds_per_byte;
    }
  }
  return t;
}

TEST(IntraOp, OptimalOnTinyModelsAgainstEnumeratingEveryPlan) {
  CbcSolver cbc;
  IntraOpOptions o;
  Mesh mesh = *Mesh::parse("2");
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40 && checked < 12; ++seed) {
    Graph g = testing::random_model(3, seed);
    std::vector<std::vector<OpStrategy>> all;
    double combos = 1;
    for (OpId id = 0; id < g.num_ops(); ++id) {
      all.push_back(enumerate_strategies(g, id, mesh));
      combos *= static_cast<double>(all.back().size());
    }
    if (combos > 4096) continue;
    std::optional<double> best;
    ShardingPlan p = ShardingPlan::replicated(g, mesh);
    std::vector<size_t> c(all.size(), 0);
    while (true) {
      for (size_t i = 0; i < c.size(); ++i) p.ops[i] = all[i][c[i]];
      double t = plan_seconds(g, p, o);
      if (!best || t < *best) best = t;
      size_t i = 0;
      while (i < c.size() && ++c[i] == all[i].size()) c[i++] = 0;
      if (i == c.size()) break;
    }
    auto got = plan_intra_op(g, mesh, Pins{}, cbc, o);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_TRUE(got->optimal);
    EXPECT_NEAR(got->seconds, *best, 1e-9 + 1e-9 * *best) << "seed " << seed;
    EXPECT_NEAR(plan_seconds(g, got->plan, o), got->seconds, 1e-9 + 1e-9 * got->seconds);
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(IntraOp, NeverWorseThanPropagationAndItsPlansExecute) {
  CbcSolver cbc;
  IntraOpOptions o;
  for (const char* strategy : {"tp=2", "dp=2,tp=2", "dp=2", "tp=4"}) {
    Graph g = *zoo::build_zoo_model("gpt-tiny");
    auto spec = *StrategySpec::parse(strategy);
    Mesh mesh = *spec.mesh(spec.devices());
    Pins pins = *tactic_pins(g, mesh, spec);
    auto prop = propagate(g, mesh, pins);
    ASSERT_TRUE(prop.ok());
    auto ilp = plan_intra_op(g, mesh, pins, cbc, o);
    ASSERT_TRUE(ilp.ok()) << ilp.error().to_string();
    EXPECT_LE(plan_seconds(g, ilp->plan, o), plan_seconds(g, prop->plan, o) * (1 + 1e-9))
        << strategy;
    auto progs = lower(g, ilp->plan);
    ASSERT_TRUE(progs.ok());
    TensorMap feeds;
    auto inputs = random_inputs(g, 3, 16);
    for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
    for (ValueId v : g.params()) feeds.emplace(v, init_param(g.value(v).name, g.type(v), 3));
    auto got = run_threaded(g, *progs, feeds);
    ASSERT_TRUE(got.ok());
    Interpreter ref(g);
    for (ValueId v : g.params()) ref.set_param(v, feeds.at(v));
    auto want = ref.run(inputs);
    ASSERT_TRUE(want.ok());
    const Tensor &a = (*want)[0], &b = got->at(g.outputs()[0]);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.f32()[i], b.f32()[i], 1e-4 * std::max(1.0f, std::fabs(a.f32()[i])));
  }
}

TEST(IntraOp, MemoryLimitForcesShardingAndTooLittleSaysTheMinimum) {
  CbcSolver cbc;
  Graph g = *zoo::build_zoo_model("gpt-tiny");
  Mesh mesh = *Mesh::parse("4");
  IntraOpOptions free_o;
  auto unlimited = plan_intra_op(g, mesh, Pins{}, cbc, free_o);
  ASSERT_TRUE(unlimited.ok());
  IntraOpOptions tight = free_o;
  tight.memory_limit_bytes = unlimited->memory_bytes * 0.6;
  auto limited = plan_intra_op(g, mesh, Pins{}, cbc, tight);
  ASSERT_TRUE(limited.ok()) << limited.error().to_string();
  EXPECT_LE(limited->memory_bytes, tight.memory_limit_bytes);
  EXPECT_GE(limited->seconds, unlimited->seconds);
  IntraOpOptions tiny = free_o;
  tiny.memory_limit_bytes = 1024;
  auto none = plan_intra_op(g, mesh, Pins{}, cbc, tiny);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(
      none.error().message.rfind("no plan fits in 1.00 KiB per device; the smallest needs ", 0), 0u)
      << none.error().message;
}

}  // namespace
}  // namespace heddle::search
