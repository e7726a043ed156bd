// Ring attention (cp_comm=ring): the cp axis's gathers of keys and values lowered as ring steps
// (send to the next member, receive from the previous) interleaved with the consuming ops' block
// kernels. The programs count the steps, move the all-gather's bytes, and compute what the
// all-gather form computes, in forward and backward.
#include <gtest/gtest.h>

#include <cmath>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

// A gpt-tiny training step (batch 4, sequence 32) and its plan for `strategy`.
struct Planned {
  Graph g;
  ShardingPlan plan;
  std::vector<ParamUpdate> updates;
};

Planned train_step(const std::string& strategy, int64_t devices) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model("gpt-tiny", zoo::ZooOverrides::sized(4), mo);
  EXPECT_TRUE(fwd.ok());
  auto step = build_train_step(*fwd);
  EXPECT_TRUE(step.ok());
  for (const auto& u : step->updates) step->graph.add_output(u.grad);  // compared directly
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok()) << strategy;
  auto p = plan_from_strategy(step->graph, *spec->mesh(devices), *spec);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return {std::move(step->graph), p->plan, std::move(step->updates)};
}

// Collectives of `c` over `group` in `p`.
int64_t count(const DeviceProgram& p, Collective c, const std::vector<int64_t>& group) {
  int64_t n = 0;
  for (const Instr& in : p.instrs)
    n += in.kind == Instr::Kind::kCollective && in.collective == c && in.group == group;
  return n;
}

TEST(RingAttention, EachGatherBecomesCpMinusOnePointToPointSteps) {
  for (auto [strategy, cp] : {std::pair{"cp=2,dp=2", 2}, {"cp=4", 4}, {"cp=2,tp=2", 2}}) {
    Planned gathered = train_step(strategy, 4);
    Planned ring = train_step(std::string(strategy) + ",cp_comm=ring", 4);
    const int64_t axis = ring.plan.mesh.find("cp");
    ASSERT_EQ(ring.plan.ring_axis, axis) << strategy;
    EXPECT_EQ(gathered.plan.ring_axis, -1);
    auto a = lower(gathered.g, gathered.plan);
    auto r = lower(ring.g, ring.plan);
    ASSERT_TRUE(a.ok() && r.ok()) << strategy;
    int64_t rings = 0;
    for (int64_t d = 0; d < 4; ++d) {
      const DeviceProgram &pa = (*a)[d], &pr = (*r)[d];
      const std::vector<int64_t> group = ring.plan.mesh.group(axis, d);
      // Every all-gather of the cp axis that feeds an op walking its blocks is a ring; the
      // keys and values of both layers (forward) are, at least.
      const int64_t turned =
          count(pa, Collective::kAllGather, group) - count(pr, Collective::kAllGather, group);
      EXPECT_GE(turned, 4) << strategy << " device " << d << "\n"
                           << pr.to_string(ring.g, ring.plan.mesh);
      EXPECT_EQ(count(pr, Collective::kSendRecv, group), turned * (cp - 1)) << strategy;
      rings += turned;
      // Each ring's steps receive the other members' blocks, each once, into the gathered tile;
      // each block's kernel follows its block.
      int64_t received = 0, blocks = 0;
      for (const Instr& in : pr.instrs) {
        if (in.kind == Instr::Kind::kCollective && in.ring > 0) {
          EXPECT_EQ(in.group, group);
          EXPECT_TRUE(in.whole.contains(in.box));
          received += in.box.volume();
          if (in.ring == cp - 1) {
            EXPECT_EQ(received * cp, in.whole.volume() * (cp - 1)) << strategy;
            received = 0;
          }
        }
        if (in.kind == Instr::Kind::kKernel && in.ring >= 0) {
          ++blocks;
          EXPECT_EQ(in.calls.size(), 1u);
          EXPECT_TRUE(in.whole.contains(in.calls[0].box));
          EXPECT_EQ(in.calls[0].box.volume() * cp, in.whole.volume()) << strategy;
        }
      }
      EXPECT_EQ(blocks, turned * cp) << strategy;
    }
    // The same bytes as the all-gathers (BytesMovedCost: (n-1)/n of the gathered tile).
    ProgramStats sa = program_stats(gathered.g, *a), sr = program_stats(ring.g, *r);
    EXPECT_EQ(sr.ring_steps, rings * (cp - 1)) << strategy;
    EXPECT_EQ(sa.ring_steps, 0);
    EXPECT_NEAR(sr.comm_bytes, sa.comm_bytes, 1e-9 * sa.comm_bytes) << strategy;
  }
}

// The ring form computes the all-gather form's step: the loss and the gradients agree to rounding
// (the blocks of a key-reducing product add up in another order).
TEST(RingAttention, TrainingStepsMatchTheAllGatherForm) {
  for (auto strategy : {"cp=2,dp=2", "cp=4", "cp=2,tp=2"}) {
    Planned gathered = train_step(strategy, 4);
    Planned ring = train_step(std::string(strategy) + ",cp_comm=ring", 4);
    TensorMap feeds = testing::random_feeds(gathered.g, 5);
    for (const auto& u : gathered.updates)  // fresh optimizer state (random moments give NaN)
      for (const auto& st : u.state)
        feeds.insert_or_assign(st.first, Tensor(gathered.g.type(st.first)));
    auto a = run_threaded(gathered.g, *lower(gathered.g, gathered.plan), feeds);
    auto r = run_threaded(ring.g, *lower(ring.g, ring.plan), feeds);
    ASSERT_TRUE(a.ok() && r.ok()) << strategy;
    // The loss and every gradient (an AdamW update of a near-zero gradient is ill-conditioned:
    // its sign follows rounding, as `run --check` notes).
    std::vector<ValueId> compared = {gathered.g.outputs()[0]};
    for (const auto& u : gathered.updates) compared.push_back(u.grad);
    for (ValueId v : compared) {
      const Tensor &x = a->at(v), &y = r->at(v);
      ASSERT_EQ(x.numel(), y.numel());
      for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_NEAR(x.f32()[i], y.f32()[i], 1e-4 * std::max(1.0f, std::fabs(x.f32()[i])))
            << strategy << " " << gathered.g.value(v).name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace heddle
