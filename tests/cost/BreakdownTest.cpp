// The step breakdown: its categories add up to the step time on every stage and on average, each
// category appears exactly when the strategy causes it, overlap moves communication out of the
// step, and explain_difference() names what separates two steps.
#include <gtest/gtest.h>

#include <cmath>

#include "SimulateZoo.h"
#include "heddle/cost/Simulator.h"
#include "heddle/cost/StepBreakdown.h"

namespace heddle::cost {
namespace {

SimulationResult sim(const std::string& model, const std::string& strategy, int64_t batch,
                     bool train = true, bool overlap = false,
                     const std::string& cluster = "a100x32") {
  return simulate_zoo(model, cluster, strategy, batch, train, overlap);
}

void expect_sums_to_step(const SimulationResult& r) {
  EXPECT_NEAR(r.breakdown.total(), r.step_time_s, 1e-9 * r.step_time_s + 1e-12);
  for (size_t i = 0; i < r.stages.size(); ++i)
    EXPECT_NEAR(r.stages[i].breakdown.total(), r.step_time_s, 1e-9 * r.step_time_s + 1e-12)
        << "stage " << i;
}

TEST(Breakdown, SumsToTheStepTime) {
  for (const char* s :
       {"dp=1,tp=8,pp=4,mb=1,schedule=interleaved:2,recompute=full",
        "dp=4,tp=2,pp=4,mb=1,schedule=zb-h1,zero=1", "dp=8,tp=4,zero=3,recompute=selective",
        "dp=2,tp=4,pp=4,mb=1,schedule=gpipe,sp=on"}) {
    SCOPED_TRACE(s);
    auto r = sim("megatron-7.5b", s, 32);
    expect_sums_to_step(r);
  }
  auto fwd = sim("megatron-7.5b", "dp=2,tp=4,pp=4,mb=1", 16, false);
  expect_sums_to_step(fwd);
  EXPECT_EQ(fwd.breakdown.optimizer_s, 0);
  EXPECT_EQ(fwd.breakdown.recompute_s, 0);
}

TEST(Breakdown, EachCategoryWhenTheStrategyCausesIt) {
  auto plain = sim("megatron-7.5b", "dp=32,attention=eager", 32);
  EXPECT_GT(plain.breakdown.compute_s, 0);
  EXPECT_GT(plain.breakdown.grad_reduction_s, 0);  // dp=32 reduces gradients
  EXPECT_GT(plain.breakdown.optimizer_s, 0);
  EXPECT_EQ(plain.breakdown.tp_sp_s, 0);
  EXPECT_EQ(plain.breakdown.pipeline_send_s, 0);
  EXPECT_EQ(plain.breakdown.recompute_s, 0);
  EXPECT_NEAR(plain.breakdown.bubble_s, 0, 1e-9);

  // Flash attention recomputes its scores in backward (the a100 default).
  EXPECT_GT(sim("megatron-7.5b", "dp=32", 32).breakdown.recompute_s, 0);
  auto tp = sim("megatron-7.5b", "dp=4,tp=8,recompute=full", 32);
  EXPECT_GT(tp.breakdown.tp_sp_s, 0);
  EXPECT_GT(tp.breakdown.recompute_s, 0);
  EXPECT_EQ(tp.breakdown.pipeline_send_s, 0);

  auto pp = sim("megatron-7.5b", "dp=8,pp=4,mb=1,overlap=none", 32);
  EXPECT_GT(pp.breakdown.pipeline_send_s, 0);
  EXPECT_GT(pp.breakdown.bubble_s, 0);
  EXPECT_EQ(pp.breakdown.overlapped_send_s, 0);
  // Overlap hides the sends and most of the gradient reduction: listed apart, the step shorter.
  auto ov = sim("megatron-7.5b", "dp=8,pp=4,mb=1,overlap=dp", 32, true, true);
  expect_sums_to_step(ov);
  EXPECT_EQ(ov.breakdown.pipeline_send_s, 0);
  EXPECT_GT(ov.breakdown.overlapped_send_s, 0);
  EXPECT_GT(ov.breakdown.overlapped_grad_s, 0);
  EXPECT_LT(ov.breakdown.grad_reduction_s, pp.breakdown.grad_reduction_s);
  EXPECT_LT(ov.step_time_s, pp.step_time_s);

  // Expert parallelism: the dispatch and combine all-to-alls are cp/ep traffic.
  auto ep = sim("moe-tiny", "dp=2,ep=2", 8, true, false, "a100x4");
  expect_sums_to_step(ep);
  EXPECT_GT(ep.breakdown.cp_ep_s, 0);
  auto no_ep = sim("moe-tiny", "dp=4", 8, true, false, "a100x4");
  EXPECT_EQ(no_ep.breakdown.cp_ep_s, 0);
}

TEST(Breakdown, ExplainsTheDifference) {
  StepBreakdown a, b;
  a.compute_s = 10;
  a.bubble_s = 4;
  a.tp_sp_s = 1;
  b.compute_s = 10;
  b.bubble_s = 1;
  b.tp_sp_s = 2;
  EXPECT_EQ(explain_difference(a, b), "bubble +3 s, tp/sp collectives -1 s");
  EXPECT_EQ(explain_difference(a, a), "no category differs");
  EXPECT_EQ(a.total(), 15);
  EXPECT_EQ(a.to_string(), "compute 10 s (67%), bubble 4 s (27%), tp/sp collectives 1 s (7%)");
  a.overlapped_grad_s = 5;  // hidden: not part of the step
  EXPECT_EQ(a.total(), 15);
  EXPECT_EQ((a + b).compute_s, 20);
  EXPECT_EQ(a.scaled(2).bubble_s, 8);
  EXPECT_EQ(a.entries().size(), 14u);
}

TEST(Breakdown, ForwardStrategyHoldsOnlyKeysThatApply) {
  auto fwd = sim("megatron-7.5b", "dp=2,tp=4,pp=4,mb=1,zero=1,recompute=full", 16, false);
  EXPECT_EQ(fwd.strategy, "dp=2,tp=4,pp=4,mb=1");
  auto one = sim("megatron-7.5b", "dp=8,tp=4,zero=1", 32);
  EXPECT_EQ(one.strategy, "dp=8,tp=4,pp=1,zero=1,mb=4,recompute=none");
}

}  // namespace
}  // namespace heddle::cost
