// The configuration search: never beaten by a grid of Megatron layouts with every ZeRO stage and
// recomputation, keeps whichever of the tactics' and the intra-op ILP's stage plans simulates
// faster, honours pins, and answers the energy, device-cap and step-time-target questions.
#include <gtest/gtest.h>

#include "heddle/search/ConfigSearch.h"

namespace heddle::search {
namespace {

cost::ModelSource small_gpt() {
  zoo::ZooOverrides over;
  over.layers = 4;
  over.seq = 256;
  over.batch = 32;
  return *cost::zoo_model_source("gpt3-1.3b", over);
}

TEST(ConfigSearch, NeverLosesToAGridOfLayoutsZeroStagesAndRecomputation) {
  auto model = small_gpt();
  auto cluster = *cost::cluster_preset("a100x8");
  cluster.device.memory_bytes = 6e9;  // tight enough that memory settings matter
  ConfigSearchOptions o;
  o.train = true;
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  EXPECT_TRUE(found->complete);
  EXPECT_GT(found->ilp.solves, 0);
  double grid_best = 1e30;
  int feasible = 0;
  auto cache = std::make_shared<cost::SimulationCache>();
  for (int64_t tp : {1, 2, 4, 8})
    for (int64_t pp : {1, 2, 4})
      for (int64_t mb : {1, 2, 4})
        for (const char* sched : {"1f1b", "interleaved:2"})
          for (int64_t zero : {0, 1, 2, 3})
            for (const char* rc : {"none", "selective", "full"}) {
              if (8 % (tp * pp) != 0 || (pp == 1 && std::string(sched) != "1f1b")) continue;
              StrategySpec s;
              s.tp = tp, s.pp = pp, s.dp = 8 / tp / pp, s.micro_batch = mb, s.zero = zero;
              s.recompute = rc;
              if (pp > 1) s.schedule = sched;
              cost::SimulateOptions so;
              so.train = true;
              so.cache = cache;
              auto r = cost::simulate(model, cluster, s, so);
              if (!r.ok() || !r->feasible) continue;
              ++feasible;
              grid_best = std::min(grid_best, r->step_time_s);
            }
  ASSERT_GT(feasible, 10);
  EXPECT_LE(found->best.sim.step_time_s, grid_best * (1 + 1e-12));
  // The ILP's stage plans are kept only when they simulate faster than the tactics' plan.
  for (const auto& r : found->ranking)
    if (r.stage_planner != "tactics") {
      cost::SimulateOptions so;
      so.train = true;
      auto t = cost::simulate(model, cluster, r.spec, so);
      ASSERT_TRUE(t.ok());
      EXPECT_LT(r.sim.step_time_s, t->step_time_s);
    }
}

TEST(ConfigSearch, TimeLimitReturnsTheBestFoundNotProven) {
  auto model = small_gpt();
  auto cluster = *cost::cluster_preset("a100x8");
  ConfigSearchOptions o;
  o.train = true;
  o.time_limit_s = 1e-9;
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  EXPECT_FALSE(found->complete);
  EXPECT_TRUE(found->best.sim.feasible);
  EXPECT_LT(found->evaluated, found->candidates);
}

TEST(ConfigSearch, PinsRestrictTheSearch) {
  auto model = small_gpt();
  auto cluster = *cost::cluster_preset("a100x8");
  for (const char* pins : {"auto,pp=2", "auto,tp=2", "auto,dp=8"}) {
    ConfigSearchOptions o;
    o.train = true;
    o.pins = *StrategySpec::parse(pins);
    auto found = search_configs(model, cluster, o);
    ASSERT_TRUE(found.ok()) << pins << found.error().to_string();
    for (const auto& r : found->ranking) {
      EXPECT_EQ(r.sim.pp, o.pins.pp.value_or(r.sim.pp)) << pins;
      EXPECT_EQ(r.sim.tp, o.pins.tp.value_or(r.sim.tp)) << pins;
      EXPECT_EQ(r.sim.dp, o.pins.dp.value_or(r.sim.dp)) << pins;
    }
  }
  ConfigSearchOptions bad;
  bad.pins = *StrategySpec::parse("auto,pp=3");
  auto none = search_configs(model, cluster, bad);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no parallel layout of 8 devices"), std::string::npos);
}

TEST(ConfigSearch, EnergyObjectiveDeviceCapAndStepTimeTarget) {
  auto model = small_gpt();
  auto cluster = *cost::cluster_preset("a100x8");
  ConfigSearchOptions o;
  o.train = true;
  o.max_devices = 8;
  o.objective = Objective::kEnergy;
  auto green = search_configs(model, cluster, o);
  ASSERT_TRUE(green.ok()) << green.error().to_string();
  EXPECT_EQ(green->device_counts, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_GT(green->best.sim.energy_j, 0);
  EXPECT_LE(green->best.sim.energy_j, green->fastest.sim.energy_j);
  EXPECT_GE(green->best.sim.step_time_s, green->fastest.sim.step_time_s);
  for (const auto& r : green->ranking) EXPECT_GE(r.sim.energy_j, green->best.sim.energy_j);
  // The smallest count reaching a target between the 2-device and the 8-device plans' times.
  ConfigSearchOptions two = o;
  two.objective = Objective::kTime;
  two.max_devices = 2;
  auto on2 = search_configs(model, cluster, two);
  ASSERT_TRUE(on2.ok());
  ConfigSearchOptions target = two;
  target.max_devices = 0;
  target.target_step_time_s = on2->fastest.sim.step_time_s * 0.9;
  auto reached = search_configs(model, cluster, target);
  ASSERT_TRUE(reached.ok()) << reached.error().to_string();
  EXPECT_GT(reached->best.sim.devices, 2);
  EXPECT_LE(reached->best.sim.step_time_s, target.target_step_time_s);
  ConfigSearchOptions smaller = two;
  smaller.max_devices = reached->best.sim.devices / 2;
  auto below = search_configs(model, cluster, smaller);
  ASSERT_TRUE(below.ok());
  EXPECT_GT(below->fastest.sim.step_time_s, target.target_step_time_s);
  target.target_step_time_s = 1e-9;
  auto missed = search_configs(model, cluster, target);
  ASSERT_FALSE(missed.ok());
  EXPECT_EQ(missed.error().message.rfind("no plan reaches a step time of 1e-09 s on up to 8 "
                                         "devices; the fastest found takes ",
                                         0),
            0u)
      << missed.error().message;
}

// A GPT with a large vocabulary on four pipeline stages: the head makes the last stage slow, an
// uneven layer split wins, and it is never slower than the best even split.
TEST(ConfigSearch, UnevenLayerSplitWhenTheHeadIsHeavy) {
  zoo::ZooOverrides over;
  over.layers = 8;
  over.vocab = 250000;
  over.batch = 16;
  auto model = *cost::zoo_model_source("gpt3-1.3b", over);
  auto cluster = *cost::cluster_preset("v100x4");
  ConfigSearchOptions o;
  o.train = true;
  o.pins = *StrategySpec::parse("auto,pp=4");
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  const ConfigResult& best = found->best;
  ASSERT_EQ(best.spec.layers.size(), 4u) << best.sim.strategy;
  int64_t sum = 0;
  for (int64_t n : best.spec.layers) sum += n;
  EXPECT_EQ(sum, 8);
  EXPECT_LT(best.spec.layers.back(), 2);  // the head's stage holds fewer layers
  EXPECT_NE(best.sim.strategy.find("layers="), std::string::npos) << best.sim.strategy;
  ConfigSearchOptions even = o;
  even.split_layouts = 0;
  auto plain = search_configs(model, cluster, even);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->best.spec.layers.empty());
  EXPECT_LT(best.sim.step_time_s, plain->best.sim.step_time_s);
  // Re-simulating the chosen strategy gives the same step; the search is deterministic.
  cost::SimulateOptions so;
  so.train = true;
  auto again = cost::simulate(model, cluster, *StrategySpec::parse(best.sim.strategy), so);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->step_time_s, best.sim.step_time_s);
  auto twice = search_configs(model, cluster, o);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->best.sim.strategy, best.sim.strategy);
  // Every split kept beats the even split of its layout.
  for (const auto& r : found->ranking) {
    if (r.spec.layers.empty()) continue;
    StrategySpec e = r.spec;
    e.layers.clear();
    auto base = cost::simulate(model, cluster, e, so);
    ASSERT_TRUE(base.ok());
    EXPECT_LT(r.sim.step_time_s, base->step_time_s) << r.sim.strategy;
  }
}

}  // namespace
}  // namespace heddle::search
