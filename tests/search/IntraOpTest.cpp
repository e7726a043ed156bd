// The intra-op ILP: optimal against brute force on random strategy graphs and on tiny models,
// never worse than propagation, memory limits honoured, and its plans execute correctly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/RandomModel.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/search/IntraOp.h"
#include "heddle/search/LayerBlocks.h"
#include "heddle/search/Reduction.h"
#include "heddle/sharding/Reshard.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/sharding/UserTactics.h"

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
  o.merge_followers = false;  // the exact problem: every op chooses freely
  o.fold_layers = false;
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

// A random reduction: some nodes follow an earlier node, some repeat an earlier node with as
// many choices, weights between 0.5 and 3.
Reduction random_reduction(std::mt19937_64& rng, const StrategyGraph& sg) {
  Reduction red = identity_reduction(sg);
  std::uniform_real_distribution<double> w(0.5, 3);
  for (auto& x : red.node_weight) x = w(rng);
  for (auto& x : red.edge_weight) x = w(rng);
  std::vector<int> parent(sg.nodes.size(), -1), same(sg.nodes.size(), -1);
  for (size_t v = 1; v < sg.nodes.size(); ++v)
    if (rng() % 3 == 0) parent[v] = static_cast<int>(rng() % v);
  merge_followers(sg, parent, red);
  for (size_t v = 1; v < sg.nodes.size(); ++v) {
    if (red.root[v] != static_cast<int>(v) || rng() % 3 != 0) continue;
    int u = static_cast<int>(rng() % v);
    if (sg.nodes[u].cost.size() == sg.nodes[v].cost.size()) same[v] = u;
  }
  tie_nodes(sg, same, red);
  finish_reduction(red);
  return red;
}

// The weighted cost of a full assignment: what a reduction's graph must reproduce.
double weighted_cost(const StrategyGraph& sg, const Reduction& red, const std::vector<int>& c) {
  double cost = 0;
  for (size_t v = 0; v < sg.nodes.size(); ++v)
    cost += red.node_weight[v] * sg.nodes[v].cost[static_cast<size_t>(c[v])];
  for (size_t e = 0; e < sg.edges.size(); ++e) {
    const auto& E = sg.edges[e];
    cost +=
        red.edge_weight[e] * E.cost[static_cast<size_t>(c[E.from]) * sg.nodes[E.to].cost.size() +
                                    static_cast<size_t>(c[E.to])];
  }
  return cost;
}

TEST(Reduction, MergedAndTiedIlpMatchesBruteForceOverTheReducedChoices) {
  std::mt19937_64 rng(7);
  CbcSolver cbc;
  int reduced_somewhere = 0;
  for (int trial = 0; trial < 120; ++trial) {
    StrategyGraph sg = random_strategy_graph(rng, 3 + trial % 6);
    Reduction red = random_reduction(rng, sg);
    StrategyGraph small = reduce_strategy_graph(sg, red);
    reduced_somewhere += small.nodes.size() < sg.nodes.size();
    // Every reduced assignment prices as its expansion does in the weighted original.
    std::vector<int> c(small.nodes.size(), 0);
    std::optional<double> best;
    while (true) {
      double got = small.evaluate(c).first;
      EXPECT_NEAR(got, weighted_cost(sg, red, expand_choice(red, c)), 1e-9 * (1 + got));
      if (!best || got < *best) best = got;
      size_t v = 0;
      while (v < c.size() && ++c[v] == static_cast<int>(small.nodes[v].cost.size())) c[v++] = 0;
      if (v == c.size()) break;
    }
    auto ilp = solve_strategy_graph(small, cbc);
    ASSERT_TRUE(ilp.ok()) << trial;
    EXPECT_TRUE(ilp->optimal);
    EXPECT_NEAR(ilp->cost, *best, 1e-6) << "trial " << trial;
    EXPECT_EQ(*brute_force(small), *best);
  }
  EXPECT_GT(reduced_somewhere, 60);
}

TEST(Reduction, FollowersAnswerTheirParentCheapest) {
  StrategyGraph sg;
  sg.nodes.push_back({{1, 1}, {0, 0}});
  sg.nodes.push_back({{5, 0, 3}, {0, 0, 0}});
  sg.edges.push_back({0, 1, {0, 9, 1, 7, 7, 0}});  // parent 0: costs 5,9,4; parent 1: 12,7,3
  Reduction red = identity_reduction(sg);
  merge_followers(sg, {-1, 0}, red);
  finish_reduction(red);
  EXPECT_EQ(red.reduced_nodes, 1);
  EXPECT_EQ(red.table[1], (std::vector<int>{2, 2}));
  StrategyGraph small = reduce_strategy_graph(sg, red);
  EXPECT_EQ(small.nodes[0].cost, (std::vector<double>{1 + 3 + 1, 1 + 3 + 0}));
}

TEST(LayerBlocks, FindsTheLayersOfTransformersAndNothingInRandomGraphs) {
  for (int64_t layers : {2, 3, 5}) {
    zoo::ZooOverrides over;
    over.layers = layers;
    Graph g = *zoo::build_zoo_model("gpt-tiny", over);
    RepeatedBlocks b = find_repeated_blocks(g);
    EXPECT_EQ(b.count, layers) << layers;
    zoo::ZooOverrides one = over;
    one.layers = 1;
    Graph g1 = *zoo::build_zoo_model("gpt-tiny", one);
    EXPECT_EQ(b.length * (layers - 1), g.num_ops() - g1.num_ops()) << layers;
  }
  Graph r = testing::random_model(3, 5);
  EXPECT_LE(find_repeated_blocks(r).count * find_repeated_blocks(r).length, r.num_ops());
}

TEST(IntraOp, MergedAndFoldedSolveCostsWhatTheFullSolveCostsOnSmallTransformers) {
  CbcSolver cbc;
  for (const char* strategy : {"tp=2", "dp=2,tp=2"}) {
    zoo::ZooOverrides over;
    over.layers = 4;
    Graph g = *zoo::build_zoo_model("gpt-tiny", over);
    auto spec = *StrategySpec::parse(strategy);
    Mesh mesh = *spec.mesh(spec.devices());
    Pins pins = *tactic_pins(g, mesh, spec);
    IntraOpOptions exact;
    exact.merge_followers = false;
    exact.fold_layers = false;
    auto full = plan_intra_op(g, mesh, pins, cbc, exact);
    ASSERT_TRUE(full.ok()) << full.error().to_string();
    IntraOpOptions small;
    auto folded = plan_intra_op(g, mesh, pins, cbc, small);
    ASSERT_TRUE(folded.ok()) << folded.error().to_string();
    EXPECT_EQ(folded->layer_blocks, 4);
    EXPECT_LT(folded->nodes * 3, g.num_ops()) << strategy;
    EXPECT_LT(folded->variables * 3, full->variables) << strategy;
    EXPECT_NEAR(folded->seconds, full->seconds, 1e-9 * full->seconds) << strategy;
    EXPECT_NEAR(plan_seconds(g, folded->plan, exact), full->seconds, 1e-9 * full->seconds);
    // A two-layer graph scaled to four layers costs what the four-layer graph does.
    over.layers = 2;
    Graph g2 = *zoo::build_zoo_model("gpt-tiny", over);
    Pins pins2 = *tactic_pins(g2, mesh, spec);
    IntraOpOptions scaled;
    scaled.layer_scale = 2;
    auto two = plan_intra_op(g2, mesh, pins2, cbc, scaled);
    ASSERT_TRUE(two.ok());
    EXPECT_NEAR(two->seconds, full->seconds, 1e-9 * full->seconds) << strategy;
  }
}

TEST(IntraOp, PricedByTheCostModelOnAClusterNeverWorseThanTactics) {
  CbcSolver cbc;
  auto cluster = *cost::cluster_preset("a100x8");
  zoo::ZooOverrides over;
  over.layers = 2;
  over.seq = 256;
  over.batch = 8;
  Graph g = *zoo::build_zoo_model("gpt3-1.3b", over);
  auto spec = *StrategySpec::parse("dp=2,tp=4");
  Mesh mesh = *spec.mesh(8);
  Pins pins = *tactic_pins(g, mesh, spec);
  IntraOpOptions o;
  o.cluster = &cluster;
  o.train = true;
  o.layer_scale = 6;
  auto p = plan_intra_op(g, mesh, pins, cbc, o);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_TRUE(p->optimal);
  EXPECT_GT(p->seconds, 0);
  // The tactics' plan is one of the plans the ILP ranges over (pinned, the ILP prices it).
  auto prop = plan_from_strategy(g, mesh, spec);
  ASSERT_TRUE(prop.ok());
  Pins fixed = pins;
  for (OpId id = 0; id < g.num_ops(); ++id) fixed.ops[id] = prop->plan.ops[id];
  auto tactics = plan_intra_op(g, mesh, fixed, cbc, o);
  ASSERT_TRUE(tactics.ok());
  EXPECT_LE(p->seconds, tactics->seconds * (1 + 1e-9));
}

// Tactics pin decisions, the ILP completes the rest: a result pinned to its channel dim and an
// op pinned to split the image height come out as pinned, and the plan runs to the reference.
TEST(IntraOp, HonoursTacticsAndCompletesTheRest) {
  auto g = parse_graph_file(std::string(HEDDLE_SOURCE_DIR) + "/examples/batchnorm.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  Mesh mesh = *Mesh::parse("tp=4");
  std::vector<Tactic> tactics = {*Tactic::parse("%y:1=tp"), *Tactic::parse("%xc:h=tp")};
  auto pins = apply_tactics(*g, mesh, Pins{}, tactics);
  ASSERT_TRUE(pins.ok()) << pins.error().to_string();
  CbcSolver cbc;
  auto p = plan_intra_op(*g, mesh, *pins, cbc);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  const OpId xc = g->value(*g->find_value("xc")).producer;
  const OpId y = g->value(*g->find_value("y")).producer;
  EXPECT_EQ(p->plan.ops[xc].dim(0), 2);  // h
  auto placed = derive_placements(*g, y, mesh, p->plan.ops[y]);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->results[0].sharding.at(0), Placement::shard(1));
  // A result pin no split gives: the diagnostic names the op.
  auto bad = apply_tactics(*g, mesh, Pins{}, {*Tactic::parse("%xc:h=tp")});
  ASSERT_TRUE(bad.ok());
  bad->value_axes[*g->find_value("xc")][0] = Placement::shard(3);
  auto refused = plan_intra_op(*g, mesh, *bad, cbc);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("no strategy of op 'sub' defining %xc"), std::string::npos)
      << refused.error().message;
  // The plan executes to the reference.
  auto progs = lower(*g, p->plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  TensorMap feeds;
  auto inputs = random_inputs(*g, 5, 16);
  feeds.emplace(g->inputs()[0], inputs[0]);
  for (ValueId v : g->params()) feeds.emplace(v, init_param(g->value(v).name, g->type(v), 3));
  auto got = run_threaded(*g, *progs, feeds);
  ASSERT_TRUE(got.ok());
  Interpreter ref(*g);
  for (ValueId v : g->params()) ref.set_param(v, feeds.at(v));
  auto want = ref.run(inputs);
  ASSERT_TRUE(want.ok());
  const Tensor &a = (*want)[0], &b = got->at(g->outputs()[0]);
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.f32()[i], b.f32()[i], 1e-4 * std::max(1.0f, std::fabs(a.f32()[i])));
}

}  // namespace
}  // namespace heddle::search
