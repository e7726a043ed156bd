// Context parallelism (`cp=N`) in the simulator: each device keeps its share of the sequence's
// activations, ring attention's key/value traffic hides behind block attention unless overlap is
// off, gradients reduce and ZeRO shards over dp x cp, and bad requests say why.
#include <gtest/gtest.h>

#include "SimulateZoo.h"
#include "heddle/cost/Simulator.h"

namespace heddle::cost {
namespace {

// llama3-8b with two layers at sequence 32768, batch 2: cheap to cost, long enough for cp.
Result<SimulationResult> long_context(const std::string& cluster, const std::string& strategy) {
  zoo::ZooOverrides o = zoo::ZooOverrides::sized(2, std::nullopt, 32768, 2);
  auto src = model::zoo_scalable_model("llama3-8b", o);
  HEDDLE_TRY(src);
  auto c = resolve_cluster(cluster);
  HEDDLE_TRY(c);
  auto s = StrategySpec::parse(strategy);
  HEDDLE_TRY(s);
  SimulateOptions opts;
  opts.train = true;
  return simulate(*src, *c, *s, opts);
}

SimulationResult ok(const std::string& cluster, const std::string& strategy) {
  auto r = long_context(cluster, strategy);
  EXPECT_TRUE(r.ok()) << strategy << ": " << r.error().to_string();
  return r.ok() ? *r : SimulationResult{};
}

TEST(ContextParallel, ActivationsShrinkWithTheSequenceShare) {
  SimulationResult one = ok("h100x8", "dp=1,tp=8,mb=1");
  SimulationResult two = ok("h100x16", "cp=2,tp=8,mb=1");
  SimulationResult four = ok("h100x32", "cp=4,tp=8,mb=1");
  EXPECT_EQ(two.cp, 2);
  EXPECT_EQ(two.strategy.find("cp=2") != std::string::npos, true) << two.strategy;
  const double a1 = one.stages[0].activation_bytes, a2 = two.stages[0].activation_bytes,
               a4 = four.stages[0].activation_bytes;
  EXPECT_NEAR(a2 / a1, 0.5, 0.05);
  EXPECT_NEAR(a4 / a2, 0.5, 0.05);
  // Each device holds 1/cp of the tokens: its compute shrinks about as much.
  EXPECT_NEAR(two.breakdown.compute_s / one.breakdown.compute_s, 0.5, 0.08);
}

TEST(ContextParallel, KeyValueTrafficHidesBehindBlockAttentionUnlessOverlapIsOff) {
  SimulationResult ring = ok("h100x16", "cp=2,tp=8,mb=1");
  SimulationResult none = ok("h100x16", "cp=2,tp=8,mb=1,overlap=none");
  const double traffic = none.breakdown.cp_ep_s;
  ASSERT_GT(traffic, 0) << "the K/V gathers and their gradients' reductions on the cp axis";
  EXPECT_EQ(none.breakdown.overlapped_cp_s, 0);
  EXPECT_GT(ring.breakdown.overlapped_cp_s, 0);
  EXPECT_NEAR(ring.breakdown.overlapped_cp_s + ring.breakdown.cp_ep_s, traffic,
              1e-9 + traffic * 1e-6);
  EXPECT_LT(ring.breakdown.cp_ep_s, traffic);
  // At 32768 tokens a block's attention outlasts its K/V transfer: the ring hides it all.
  EXPECT_NEAR(ring.breakdown.cp_ep_s, 0, traffic * 1e-6);
}

// Ring attention folds each of its cp steps' partial output into an fp32 accumulator (memory
// time the all-gather form's one kernel does not spend): the ring's compute is longer by that,
// more so with more steps, and the merges cost nothing without cp.
TEST(ContextParallel, RingMergesCostOnlyTheRingForm) {
  SimulationResult ring = ok("h100x16", "cp=2,tp=8,mb=1");
  SimulationResult gathered = ok("h100x16", "cp=2,tp=8,mb=1,cp_comm=allgather");
  SimulationResult ring4 = ok("h100x32", "cp=4,tp=8,mb=1");
  SimulationResult gathered4 = ok("h100x32", "cp=4,tp=8,mb=1,cp_comm=allgather");
  const double merge2 = ring.breakdown.compute_s - gathered.breakdown.compute_s;
  const double merge4 = ring4.breakdown.compute_s - gathered4.breakdown.compute_s;
  EXPECT_GT(merge2, 0);
  // cp steps over 1/cp of the tokens each: the same merge bytes per device at any cp.
  EXPECT_NEAR(merge4, merge2, merge2 * 0.05);
  EXPECT_LT(merge2, 0.1 * gathered.breakdown.compute_s);
  SimulationResult one = ok("h100x8", "dp=1,tp=8,mb=1");
  SimulationResult one_gathered = ok("h100x8", "dp=1,tp=8,mb=1,cp_comm=allgather");
  EXPECT_DOUBLE_EQ(one.breakdown.compute_s, one_gathered.breakdown.compute_s);
}

TEST(ContextParallel, GradientsReduceAndZeroShardsOverDataTimesContext) {
  // Two replicas of the weights either way: ZeRO-1 shards the optimizer state over both.
  SimulationResult dp = ok("h100x16", "dp=2,tp=8,mb=1,zero=1");
  SimulationResult cp = ok("h100x16", "cp=2,tp=8,mb=1,zero=1");
  SimulationResult lone = ok("h100x8", "tp=8,mb=1,zero=1");
  EXPECT_NEAR(cp.stages[0].state_bytes, dp.stages[0].state_bytes, 1.0);
  EXPECT_LT(cp.stages[0].state_bytes, lone.stages[0].state_bytes);
  EXPECT_GT(cp.breakdown.grad_reduction_s + cp.breakdown.overlapped_grad_s, 0);
}

// MFU counts causal attention as the kernels run it (half the scores): the model FLOPs a device
// is credited with never take more time at the device's peak than the step spends computing.
// Counting full attention (the published convention, reported apart) credits the masked half
// too, and at long context that exceeds the compute time (MFU near 100% at sequence 131072).
// The all-gather form: ring attention adds its per-step merges (memory time, no model FLOPs)
// to the compute seconds.
TEST(ContextParallel, ModelFlopsCountCausalAttentionAsRun) {
  zoo::ZooOverrides o = zoo::ZooOverrides::sized(2, std::nullopt, 131072, 2);
  auto src = model::zoo_scalable_model("llama3-8b", o);
  auto c = resolve_cluster("h100x16");
  ASSERT_TRUE(src.ok() && c.ok());
  SimulateOptions opts;
  opts.train = true;
  auto r = simulate(*src, *c, *StrategySpec::parse("cp=16,mb=1,cp_comm=allgather"), opts);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double peak = c->device.peak_flops, n = static_cast<double>(c->count);
  EXPECT_LT(r->model_flops / n / peak, r->breakdown.compute_s);
  EXPECT_GT(r->published_model_flops / n / peak, r->breakdown.compute_s);
  EXPECT_LT(r->mfu, r->published_mfu);
  EXPECT_NEAR(r->mfu / r->published_mfu, r->model_flops / r->published_model_flops, 1e-12);
}

TEST(ContextParallel, BadRequestsSayWhy) {
  auto odd = long_context("h100x24", "cp=3,tp=8");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().message.rfind("cp=3 does not divide the sequence 32768 of llama3-8b", 0),
            0u)
      << odd.error().message;
  zoo::ZooOverrides o;
  auto mlp = model::zoo_scalable_model("mlp", o);
  ASSERT_TRUE(mlp.ok());
  auto c = resolve_cluster("a100x8");
  ASSERT_TRUE(c.ok());
  SimulateOptions opts;
  auto r = simulate(*mlp, *c, *StrategySpec::parse("cp=2,dp=4"), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("has no token sequence"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace heddle::cost
