// The configuration search: never beaten by a grid of Megatron layouts with every ZeRO stage and
// recomputation, keeps whichever of the tactics' and the intra-op ILP's stage plans simulates
// faster, honours pins, and answers the energy, device-cap and step-time-target questions.
#include <gtest/gtest.h>

#include <optional>

#include "heddle/search/ConfigSearch.h"
#include "heddle/search/KindStages.h"

namespace heddle::search {
namespace {

// gpt3-1.3b with the overrides given.
model::ScalableModel gpt13(int64_t layers, int64_t batch, std::optional<int64_t> seq,
                           std::optional<int64_t> vocab) {
  zoo::ZooOverrides over;
  over.layers = layers;
  over.batch = batch;
  over.seq = seq;
  over.vocab = vocab;
  return *model::zoo_scalable_model("gpt3-1.3b", over);
}

// Cut to 8 layers with a 250k vocabulary (the head costs several layers), batch 16.
model::ScalableModel heavy_head_gpt() { return gpt13(8, 16, std::nullopt, 250000); }

model::ScalableModel small_gpt() { return gpt13(4, 32, 256, std::nullopt); }

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
              s.recompute = *parse_recompute(rc);
              if (pp > 1) s.schedule = *pipeline::PipelineSchedule::parse(sched);
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

// No time to search: the best found, not proven. Also gpt3-175b on 64 A100s with 50 GiB, where
// only ZeRO-3 with recomputation on a pipeline fits: the lightest-memory setting of each layout,
// tried first, still gives a plan that fits (the search used to time out after the heavy
// settings of the first layouts, "none of which fits").
TEST(ConfigSearch, TimeLimitReturnsTheBestFoundNotProven) {
  zoo::ZooOverrides over;
  over.batch = 1536;
  auto big = *model::zoo_scalable_model("gpt3-175b", over);
  auto tight = *cost::cluster_preset("a100x64");
  tight.device.memory_bytes = 50.0 * (1 << 30);
  for (auto [model, cluster] :
       {std::pair{small_gpt(), *cost::cluster_preset("a100x8")}, std::pair{big, tight}}) {
    ConfigSearchOptions o;
    o.train = true;
    o.time_limit_s = 1e-9;
    auto found = search_configs(model, cluster, o);
    ASSERT_TRUE(found.ok()) << found.error().to_string();
    EXPECT_FALSE(found->complete);
    EXPECT_TRUE(found->best.sim.feasible);
    EXPECT_LE(found->best.sim.peak_memory_bytes, cluster.device.memory_bytes);
    EXPECT_LT(found->evaluated, std::min<int64_t>(found->candidates, 100));
  }
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

// The plan's memory is its worst stage's: a pipeline whose stages fit on average, but whose first
// stage (holding four micro-batches under 1F1B against the last stage's one) does not, is refused
// whole, and whatever the search returns fits on every stage.
TEST(ConfigSearch, RefusesAPlanWhoseWorstStageDoesNotFit) {
  auto model = gpt13(8, 16, 2048, std::nullopt);
  auto cluster = *cost::cluster_preset("a100x4");
  const StrategySpec s =
      *StrategySpec::parse("dp=1,tp=1,pp=4,mb=1,zero=0,recompute=none,schedule=1f1b");
  cost::SimulateOptions so;
  so.train = true;
  auto r = cost::simulate(model, cluster, s, so);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  double mean = 0, worst = 0;
  for (const auto& st : r->stages) {
    mean += st.peak_memory_bytes / static_cast<double>(r->stages.size());
    worst = std::max(worst, st.peak_memory_bytes);
  }
  ASSERT_LT(mean, 0.95 * worst);
  cluster.device.memory_bytes = (mean + worst) / 2;
  auto tight = cost::simulate(model, cluster, s, so);
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->feasible);
  ConfigSearchOptions o;
  o.train = true;
  o.intra_op = false;
  o.pins = *StrategySpec::parse("auto,dp=1,tp=1,pp=4,mb=1");
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  std::vector<const ConfigResult*> all = {&found->best};
  for (const auto& c : found->ranking) all.push_back(&c);
  for (const ConfigResult* c : all) {
    EXPECT_NE(c->sim.strategy, r->strategy);
    for (const auto& st : c->sim.stages)
      EXPECT_LE(st.peak_memory_bytes, cluster.device.memory_bytes) << c->sim.strategy;
  }
}

// `plan --memory-reserve` sets every device's runtime memory (the allocator allowance's fixed
// part): the search prices each candidate's peak with it, so a reserve that leaves the best
// plan a byte short makes the search choose another plan that fits with it.
TEST(ConfigSearch, TheRuntimeReserveDecidesWhatFits) {
  auto model = gpt13(8, 16, 2048, std::nullopt);
  auto cluster = *cost::cluster_preset("a100x4");
  ConfigSearchOptions o;
  o.train = true;
  o.intra_op = false;
  o.pins = *StrategySpec::parse("auto,dp=1,tp=1,pp=4,mb=1");
  auto plain = search_configs(model, cluster, o);
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  const double runtime = cluster.device.runtime_bytes + cluster.device.memory_bytes -
                         plain->best.sim.peak_memory_bytes + 1e8;
  cluster.for_each_device([&](cost::DeviceProfile& d) { d.runtime_bytes = runtime; });
  auto reserved = search_configs(model, cluster, o);
  ASSERT_TRUE(reserved.ok()) << reserved.error().to_string();
  EXPECT_NE(reserved->best.sim.strategy, plain->best.sim.strategy);
  for (const auto& st : reserved->best.sim.stages) {
    EXPECT_GE(st.allocator_bytes, runtime);
    EXPECT_LE(st.peak_memory_bytes, cluster.device.memory_bytes);
  }
}

// A GPT with a large vocabulary on four pipeline stages: the head makes the last stage slow, an
// uneven layer split wins, and it is never slower than the best even split.
TEST(ConfigSearch, UnevenLayerSplitWhenTheHeadIsHeavy) {
  auto model = heavy_head_gpt();
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

// pp need not divide the layers: 7 layer units over 2 or 4 stages are simulated (as even as they
// split, the first chunks one more) and show up in the search, deterministically.
TEST(ConfigSearch, PipelinesThatDoNotDivideTheLayers) {
  auto model = gpt13(7, 8, std::nullopt, std::nullopt);
  auto cluster = *cost::cluster_preset("v100x4");
  ConfigSearchOptions o;
  o.train = true;
  o.pins = *StrategySpec::parse("auto,pp=4");
  o.split_layouts = 0;
  o.submesh_layouts = 0;
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  EXPECT_EQ(found->best.sim.pp, 4);
  EXPECT_EQ(found->best.sim.chunk_units, (std::vector<int64_t>{2, 2, 2, 1}));
  o.split_layouts = 4;
  auto split = search_configs(model, cluster, o);
  auto again = search_configs(model, cluster, o);
  ASSERT_TRUE(split.ok() && again.ok());
  EXPECT_LE(split->best.sim.step_time_s, found->best.sim.step_time_s);
  EXPECT_EQ(split->best.sim.strategy, again->best.sim.strategy);
  int64_t sum = 0;
  for (int64_t n : split->best.sim.chunk_units) sum += n;
  EXPECT_EQ(sum, 7);
}

// Six V100s, batch 16, a GPT whose 250k-vocabulary head dwarfs a layer: no dp=3 divides the
// batch, so equal stages cannot use all six devices in two stages. The inter-op DP's answer, two
// stages on 2 and 4 devices (the head's stage wider), beats every equal-stage plan; it is what
// `heddle simulate` reproduces, and the search is deterministic.
TEST(ConfigSearch, SubMeshesOfDifferentSizesWinWhereEqualStagesCannot) {
  auto model = heavy_head_gpt();
  auto cluster = *cost::cluster_preset("v100x6");
  ConfigSearchOptions o;
  o.train = true;
  // tp=3 splits the model in uneven blocks (docs/sharding.md), and dp=2,tp=3 is faster still:
  // pinning tp=1 compares the stage layouts this test is about.
  o.pins.tp = 1;
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  const auto& best = found->best;
  ASSERT_TRUE(best.sim.heterogeneous) << best.sim.strategy;
  ASSERT_EQ(best.spec.meshes.size(), 2u);
  int64_t devices = 0;
  for (const auto& s : best.sim.stages) devices += s.devices;
  EXPECT_EQ(devices, 6);
  EXPECT_LT(best.sim.stages[0].devices, best.sim.stages[1].devices);  // the head's stage wider
  ConfigSearchOptions equal = o;
  equal.submesh_layouts = 0;
  auto plain = search_configs(model, cluster, equal);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->best.sim.heterogeneous);
  EXPECT_LT(best.sim.step_time_s, 0.9 * plain->best.sim.step_time_s);
  cost::SimulateOptions so;
  so.train = true;
  auto resim = cost::simulate(model, cluster, *StrategySpec::parse(best.sim.strategy), so);
  ASSERT_TRUE(resim.ok()) << resim.error().to_string();
  EXPECT_EQ(resim->step_time_s, best.sim.step_time_s);
  EXPECT_EQ(resim->strategy, best.sim.strategy);
  auto twice = search_configs(model, cluster, o);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->best.sim.strategy, best.sim.strategy);
}

}  // namespace
}  // namespace heddle::search

namespace heddle::search {
namespace {

// A100s then H100s, 8 of each, joined by HDR InfiniBand.
cost::Cluster a100_h100() {
  auto c = cost::cluster_from_json(
      R"({"name": "mixed", "kinds": [{"name": "a100", "device": "a100", "count": 8},
                                     {"name": "h100", "device": "h100", "count": 8}],
          "links": [{"between": ["a100", "h100"], "bandwidth": 25e9}]})",
      "mixed.json");
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return *c;
}

TEST(ConfigSearch, MixedClusterPlacesStagesOnBothKinds) {
  auto cluster = a100_h100();
  zoo::ZooOverrides over;
  over.layers = 24;
  over.batch = 128;
  auto model = *model::zoo_scalable_model("gpt3-1.3b", over);
  ConfigSearchOptions o;
  o.train = true;
  auto found = search_configs(model, cluster, o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  const auto& best = found->best.sim;
  int64_t a100_layers = 0, h100_layers = 0, a100_stages = 0, h100_stages = 0;
  for (const auto& s : best.stages) {
    (s.kind == 0 ? a100_layers : h100_layers) += s.layers;
    ++(s.kind == 0 ? a100_stages : h100_stages);
  }
  ASSERT_GT(a100_stages, 0) << best.strategy;
  ASSERT_GT(h100_stages, 0) << best.strategy;
  // The faster kind holds more layers per stage (an uneven split).
  EXPECT_GT(h100_layers * a100_stages, a100_layers * h100_stages) << best.strategy;
  // Never slower than the plan without the kind-shaped stages and layer splits.
  ConfigSearchOptions plain = o;
  plain.split_layouts = 0;
  plain.submesh_layouts = 0;
  plain.intra_op = false;
  auto even = search_configs(model, cluster, plain);
  ASSERT_TRUE(even.ok());
  EXPECT_LT(best.step_time_s, 0.95 * even->best.sim.step_time_s)
      << best.strategy << " vs " << even->best.sim.strategy;
  // simulate reproduces the plan from its strategy string; the search is deterministic.
  cost::SimulateOptions so;
  so.train = true;
  auto again = cost::simulate(model, cluster, *StrategySpec::parse(best.strategy), so);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  if (found->best.stage_planner == "tactics") {
    EXPECT_DOUBLE_EQ(again->step_time_s, best.step_time_s);
  }
  auto twice = search_configs(model, cluster, o);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->best.sim.strategy, best.strategy);
  // Kind-shaped candidates follow the kinds: each stage inside one kind.
  auto cands = kind_stage_candidates(model, cluster, found->ranking.back().spec,
                                     found->ranking.back().sim, true);
  EXPECT_GT(cands.size(), 10u);
  for (const auto& s : cands) {
    std::vector<int64_t> sizes;
    for (const auto& m : s.meshes) sizes.push_back(m.dp * m.tp);
    EXPECT_TRUE(cost::stage_kinds(cluster, sizes).ok()) << s.to_string();
  }
  // A device cap takes a one-kind cluster.
  ConfigSearchOptions capped = o;
  capped.max_devices = 8;
  EXPECT_FALSE(search_configs(model, cluster, capped).ok());
}

}  // namespace
}  // namespace heddle::search

namespace heddle::search {
namespace {

// issue 19: GPT-3 175B on one DGX A100 needs the NVMe tier (host memory cannot hold its states).
TEST(ConfigSearch, Gpt3OnOneNodePlansWithNvmeOffload) {
  auto model = *model::zoo_scalable_model("gpt3-175b", {});
  ConfigSearchOptions o;
  o.train = true;
  auto found = search_configs(model, *cost::cluster_preset("a100x8"), o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  EXPECT_NE(found->best.sim.strategy.find("offload=optimizer+params:nvme"), std::string::npos)
      << found->best.sim.strategy;
  EXPECT_TRUE(found->best.sim.feasible);
}

}  // namespace
}  // namespace heddle::search
