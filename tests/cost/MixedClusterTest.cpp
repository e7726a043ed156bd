// Mixed clusters: files with several device kinds and the links between them (strict keys, the
// named field), each pipeline stage priced on its own kind, and a mixed cluster of two equal
// kinds priced exactly as the one-kind cluster.
#include <gtest/gtest.h>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/Simulator.h"

namespace heddle::cost {
namespace {

constexpr const char* kMixed = R"({
  "name": "lab",
  "kinds": [
    {"name": "a100", "device": "a100", "count": 8},
    {"name": "h100", "device": "h100", "count": 8, "host_memory_bytes": 1e11}
  ],
  "links": [{"between": ["a100", "h100"], "bandwidth": 25e9, "latency": 1e-5}]
})";

model::ScalableModel gpt(int64_t layers, int64_t batch) {
  zoo::ZooOverrides o;
  o.layers = layers;
  o.batch = batch;
  return *model::zoo_scalable_model("gpt3-1.3b", o);
}

TEST(MixedClusters, KindsLinksAndPresetDefaults) {
  auto c = cluster_from_json(kMixed, "lab.json");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  ASSERT_TRUE(c->mixed());
  EXPECT_EQ(c->count, 16);
  EXPECT_EQ(c->kinds.size(), 2u);
  EXPECT_EQ(c->kind(1).device.name, "h100");
  EXPECT_EQ(c->kind(0).intra_node, cluster_preset("a100x8")->intra_node);  // preset links
  EXPECT_EQ(c->kind(1).host_memory_bytes, 1e11);                           // given
  EXPECT_EQ(c->host_memory_bytes, 1e11);                                   // the least over kinds
  EXPECT_EQ(c->kind_of(0, 8), 0);
  EXPECT_EQ(c->kind_of(8, 4), 1);
  EXPECT_EQ(c->kind_of(4, 8), -1);
  EXPECT_EQ(c->kind_of(12, 8), -1);
  EXPECT_EQ(c->kind_link(0, 1).bandwidth, 25e9);
  EXPECT_EQ(c->kind_link(1, 1).name, c->kind(1).inter_node.name);
  EXPECT_NEAR(c->mean_peak_flops(), (312e12 + 989e12) / 2, 1e9);
  auto sk = stage_kinds(*c, {8, 4, 4});
  ASSERT_TRUE(sk.ok());
  EXPECT_EQ(*sk, (std::vector<int64_t>{0, 1, 1}));
  auto spans = stage_kinds(*c, {4, 8, 4});
  ASSERT_FALSE(spans.ok());
  EXPECT_NE(spans.error().message.find("stage 1 (devices 4 to 11) spans two device kinds"),
            std::string::npos)
      << spans.error().message;
  // A memory override per kind, and --memory for every kind.
  auto m = cluster_from_json(
      R"({"kinds": [{"name": "a", "device": "a100", "count": 8, "memory_bytes": 4e10},
                    {"name": "b", "device": "h100", "count": 8}],
          "links": [{"between": ["b", "a"], "bandwidth": 1e10}]})",
      "m.json");
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->kind(0).device.memory_bytes, 4e10);
  m->for_each_device([](DeviceProfile& d) { d.memory_bytes = 1e10; });
  EXPECT_EQ(m->kind(1).device.memory_bytes, 1e10);
}

TEST(MixedClusters, BadFilesNameTheFieldAndTheClosestKey) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (Case c : {
           Case{R"({"kinds": [{"name": "a", "device": "a100", "cuont": 8}], "links": []})",
                "did you mean 'count'"},
           Case{R"({"kinds": [{"name": "a", "device": "a100", "count": 8}], "link": []})",
                "did you mean 'links'"},
           Case{R"({"kinds": [{"name": "a", "device": "a100", "count": 8},
                              {"name": "b", "device": "h100", "count": 8}]})",
                "no link between kinds 'a' and 'b'"},
           Case{R"({"kinds": [{"name": "a", "device": "a100", "count": 8},
                              {"name": "b", "device": "h100", "count": 8}],
                    "links": [{"between": ["a", "c"], "bandwidth": 1e10}]})",
                "names no kind 'c'"},
           Case{R"({"kinds": [{"name": "a", "device": "a100", "count": 8},
                              {"name": "a", "device": "h100", "count": 8}], "links": []})",
                "repeats kind 'a'"},
           Case{R"({"kinds": [{"name": "a", "device": "a100", "count": 8},
                              {"name": "b", "device": "h100", "count": 8}],
                    "links": [{"between": ["a", "b"], "bandwidht": 1e10}]})",
                "did you mean 'bandwidth'"},
           Case{R"({"kinds": [{"name": "a", "device": {"peak_flops": 1e12}, "count": 8}]})",
                "kinds[0].device.memory_bytes' is missing"},
           Case{R"({"kinds": []})", "'kinds' must be a non-empty list"},
       }) {
    auto r = cluster_from_json(c.text, "bad.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << r.error().message << " / expected: " << c.expect;
  }
}

TEST(MixedClusters, EachStageIsPricedOnItsKind) {
  auto c = *cluster_from_json(kMixed, "lab.json");
  auto model = gpt(8, 32);
  SimulateOptions o;
  o.train = true;
  auto r = simulate(model, c, *StrategySpec::parse("dp=8,pp=2,mb=1,zero=1"), o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_EQ(r->stages[0].device, "a100");
  EXPECT_EQ(r->stages[1].device, "h100");
  EXPECT_EQ(r->stages[1].kind, 1);
  // The same layers run faster on the H100 stage (the A100 one holds the embedding too, so
  // compare with the H100 stage holding the head).
  EXPECT_LT(r->stages[1].busy_s, r->stages[0].busy_s);
  // MFU against the devices' mean peak.
  EXPECT_NEAR(r->mfu, r->tflops_per_device * 1e12 / c.mean_peak_flops(), 1e-9);
  // Uneven splits reach the H100 stage.
  auto split = simulate(model, c, *StrategySpec::parse("dp=8,pp=2,mb=1,zero=1,layers=3/5"), o);
  ASSERT_TRUE(split.ok());
  EXPECT_LT(split->step_time_s, r->step_time_s);
  // A stage across both kinds, fp8 on the A100 kind: refused with the reason.
  auto across = simulate(model, c, *StrategySpec::parse("dp=16,mb=1"), o);
  ASSERT_FALSE(across.ok());
  EXPECT_NE(across.error().message.find("spans two device kinds"), std::string::npos);
  auto fp8 = simulate(model, c, *StrategySpec::parse("dp=8,pp=2,mb=1,precision=fp8"), o);
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.error().message.find("kind 'a100'"), std::string::npos) << fp8.error().message;
}

TEST(MixedClusters, TwoEqualKindsPriceAsOneKind) {
  auto mixed = cluster_from_json(
      R"({"kinds": [{"name": "x", "device": "a100", "count": 8},
                    {"name": "y", "device": "a100", "count": 8}],
          "links": [{"between": ["x", "y"], "bandwidth": 25e9, "latency": 1e-5}]})",
      "two.json");
  ASSERT_TRUE(mixed.ok()) << mixed.error().to_string();
  auto one = *cluster_preset("a100x16");
  auto model = gpt(8, 32);
  SimulateOptions o;
  o.train = true;
  for (const char* s : {"dp=8,pp=2,mb=2,zero=1,schedule=zb-h1", "dp=2,tp=4,pp=2,mb=4",
                        "dp=4,tp=2,pp=2,mb=1,zero=3,recompute=full,layers=3/5"}) {
    auto a = simulate(model, *mixed, *StrategySpec::parse(s), o);
    auto b = simulate(model, one, *StrategySpec::parse(s), o);
    ASSERT_TRUE(a.ok() && b.ok()) << s;
    EXPECT_DOUBLE_EQ(a->step_time_s, b->step_time_s) << s;
    EXPECT_DOUBLE_EQ(a->peak_memory_bytes, b->peak_memory_bytes) << s;
    EXPECT_DOUBLE_EQ(a->mfu, b->mfu) << s;
  }
}

// A stage planner (the search's intra-op ILP) is handed each stage's own kind: on A100 + H100
// with one stage per kind it plans the first stage for the A100 and the second for the H100,
// each with the step's techniques applied to that kind.
TEST(MixedClusters, StagePlannerPricesEachStageOnItsKind) {
  auto c = cluster_from_json(kMixed, "lab.json");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  std::vector<std::string> planned_on;
  SimulateOptions o;
  o.train = true;
  o.stage_planner = [&planned_on](const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                                  const Cluster& kind) {
    planned_on.push_back(kind.device.name);
    EXPECT_FALSE(kind.mixed());
    return stage_plan(g, mesh, kind, spec);
  };
  auto r = simulate(gpt(4, 16), *c, *StrategySpec::parse("dp=8,pp=2,mb=1"), o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(planned_on, (std::vector<std::string>{"a100", "h100"}));
  // The planner's stages are priced as the default planner's: the same step.
  SimulateOptions plain;
  plain.train = true;
  auto d = simulate(gpt(4, 16), *c, *StrategySpec::parse("dp=8,pp=2,mb=1"), plain);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(r->step_time_s, d->step_time_s);
}

}  // namespace
}  // namespace heddle::cost
