// Lowering runs each optimizer update as soon as its gradient is complete
// (LowerOptions::early_updates): the order property, and the same bits as the graph's order.
#include <gtest/gtest.h>

#include <cmath>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

struct Lowered {
  Graph graph;
  std::vector<DeviceProgram> early, late;
  Mesh mesh;
};

// A zoo model's training step under `strategy` on `devices` (one device: replicated), lowered
// both ways.
Lowered lower_both(const char* model, const char* strategy, int64_t devices) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto g = zoo::build_zoo_model(model, {}, mo);
  EXPECT_TRUE(g.ok()) << model;
  auto step = build_train_step(*g);
  EXPECT_TRUE(step.ok()) << model;
  Lowered out{std::move(step->graph), {}, {}, *Mesh::parse("1")};
  ShardingPlan plan = ShardingPlan::replicated(out.graph, *Mesh::parse("1"));
  if (devices > 1) {
    auto spec = StrategySpec::parse(strategy);
    auto mesh = spec->mesh(devices);
    auto planned = plan_from_strategy(out.graph, *mesh, *spec);
    EXPECT_TRUE(planned.ok()) << strategy;
    plan = planned->plan;
    out.mesh = *mesh;
  }
  LowerOptions late;
  late.early_updates = false;
  auto e = lower(out.graph, plan), l = lower(out.graph, plan, late);
  EXPECT_TRUE(e.ok() && l.ok()) << strategy;
  out.early = std::move(*e);
  out.late = std::move(*l);
  return out;
}

// Feeds whose second moments are not negative (AdamW takes their square root).
TensorMap feeds_of(const Graph& g) {
  TensorMap feeds = testing::random_feeds(g, 5);
  for (auto& [v, t] : feeds)
    if (g.value(v).name.rfind("v.", 0) == 0)
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::fabs(t.f32()[i]) * 0.01f;
  return feeds;
}

// Every AdamW kernel follows the kernel that completes its gradient, with only loads, frees and
// collectives (the gradient's all-reduce) between them; the first update runs before the last
// kernel of the backward pass (unrelated to it); the graph's order puts every update after it.
void expect_early(const Graph& g, const DeviceProgram& early, const DeviceProgram& late) {
  auto kernel_positions = [&](const DeviceProgram& p, OpKind kind) {
    std::vector<size_t> at;
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (p.instrs[i].kind == Instr::Kind::kKernel)
        for (const KernelCall& c : p.instrs[i].calls)
          if (g.op(c.op).kind == kind) at.push_back(i);
    return at;
  };
  auto updates = kernel_positions(early, OpKind::kAdamW);
  auto products = kernel_positions(early, OpKind::kEinsum);
  ASSERT_FALSE(updates.empty());
  ASSERT_FALSE(products.empty());
  EXPECT_LT(updates.front(), products.back()) << "an update runs before unrelated kernels";
  auto late_updates = kernel_positions(late, OpKind::kAdamW);
  auto late_products = kernel_positions(late, OpKind::kEinsum);
  EXPECT_GT(late_updates.front(), late_products.back());
  for (size_t at : updates) {
    const Op& update = g.op(early.instrs[at].calls.front().op);
    ValueId grad = update.inputs[1].value;
    size_t k = at;
    while (k > 0 && early.instrs[k - 1].kind != Instr::Kind::kKernel) --k;
    ASSERT_GT(k, 0u);
    bool computes = false;
    for (const KernelCall& c : early.instrs[k - 1].calls)
      for (const auto& r : g.op(c.op).results) computes = computes || r.value == grad;
    EXPECT_TRUE(computes) << "the kernel before the update of "
                          << g.value(update.inputs[0].value).name
                          << " does not compute its gradient";
  }
}

void expect_same_bits(const Lowered& l) {
  TensorMap feeds = feeds_of(l.graph);
  auto a = run_threaded(l.graph, l.early, feeds), b = run_threaded(l.graph, l.late, feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  for (ValueId v : l.graph.outputs()) EXPECT_TRUE(a->at(v) == b->at(v)) << l.graph.value(v).name;
}

TEST(EarlyUpdates, EachUpdateFollowsItsGradientWithTheSameResults) {
  Lowered l = lower_both("gpt-tiny", "", 1);
  expect_early(l.graph, l.early[0], l.late[0]);
  expect_same_bits(l);
  // The gradients die as they are made, but the updates' results now live beside the backward
  // pass's activations: the peak may grow, by little.
  EXPECT_LE(peak_bytes_per_device(l.graph, l.early)[0],
            peak_bytes_per_device(l.graph, l.late)[0] * 11 / 10);
}

// On several devices the updates stay where the graph has them, after the backward pass, so the
// gradients' all-reduces stay adjacent and batch (DeviceExecutor's collective batches).
TEST(EarlyUpdates, ShardedUpdatesStayAfterTheBackwardPass) {
  Lowered l = lower_both("gpt-tiny", "dp=2,tp=2", 4);
  for (size_t d = 0; d < l.early.size(); ++d)
    EXPECT_EQ(l.early[d].to_string(l.graph, l.mesh), l.late[d].to_string(l.graph, l.mesh));
  expect_same_bits(l);
}

}  // namespace
}  // namespace heddle
