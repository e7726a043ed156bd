// Lowered programs do not change when lowering's machinery does: the text of every device's
// program, for zoo models (forward and training steps) under the strategy language and for random
// graphs under random strategies (halos, 1-3 axis meshes), hashed and compared with digests
// recorded from the per-device lowering that lowered each device separately (tests/data/
// lowered_programs.txt). To record new digests after an intended change of the programs:
// HEDDLE_UPDATE_GOLDEN=1 ./build/tests/runtime/test_runtime --gtest_filter='LowerGolden.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "common/RandomFeeds.h"
#include "common/RandomModel.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

const char* kGolden = HEDDLE_SOURCE_DIR "/tests/data/lowered_programs.txt";

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Digest of every device's program text (device order), and the total line count.
std::string digest(const Graph& g, const Mesh& mesh, const std::vector<DeviceProgram>& progs) {
  uint64_t h = fnv1a("");
  int64_t lines = 0;
  for (const auto& p : progs) {
    std::string t = p.to_string(g, mesh);
    h = fnv1a(t, h);
    for (char c : t) lines += c == '\n';
  }
  std::ostringstream s;
  s << std::hex << h << std::dec << " " << lines;
  return s.str();
}

struct ZooCase {
  const char* model;
  bool train;
  const char* strategy;
  int64_t devices;
};

std::map<std::string, std::string> compute() {
  std::map<std::string, std::string> out;
  const ZooCase zoo_cases[] = {
      {"gpt-tiny", false, "dp=2,tp=2", 4},   {"gpt-tiny", true, "dp=2,tp=2", 4},
      {"gpt-tiny", true, "dp=2,zero=3", 2},  {"gpt-tiny", true, "dp=2,tp=4", 8},
      {"llama-tiny", true, "tp=2,sp=on", 2}, {"moe-tiny", false, "dp=2,tp=2", 4},
      {"mlp", true, "dp=2,zero=1", 2},       {"mlp", false, "dp=2,tp=4", 8},
      {"resnet-tiny", true, "dp=2,tp=2", 4}, {"vit-tiny", true, "tp=2,sp=on", 2},
      {"vit-tiny", false, "dp=2,tp=4", 8},
  };
  for (const auto& c : zoo_cases) {
    zoo::ModelOptions mo;
    mo.with_loss = c.train;
    auto g = zoo::build_zoo_model(c.model, {}, mo);
    EXPECT_TRUE(g.ok()) << c.model;
    if (!g.ok()) continue;
    Graph graph = std::move(*g);
    if (c.train) {
      auto step = build_train_step(graph);
      EXPECT_TRUE(step.ok()) << c.model;
      if (!step.ok()) continue;
      graph = std::move(step->graph);
    }
    auto spec = StrategySpec::parse(c.strategy);
    auto mesh = spec->mesh(c.devices);
    auto plan = plan_from_strategy(graph, *mesh, *spec);
    EXPECT_TRUE(plan.ok()) << c.model << " " << c.strategy;
    if (!plan.ok()) continue;
    auto progs = lower(graph, plan->plan);
    EXPECT_TRUE(progs.ok()) << c.model << " " << c.strategy;
    if (!progs.ok()) continue;
    out[std::string(c.model) + (c.train ? "/train/" : "/forward/") + c.strategy] =
        digest(graph, *mesh, *progs);
  }
  const char* meshes[] = {"2", "4", "8", "2x2", "2x4", "2x2x2", "a=2,b=3", "3"};
  std::mt19937_64 rng(4242);
  int64_t fetches = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    Graph g = testing::random_model(10, seed);
    Mesh mesh = *Mesh::parse(meshes[seed % 8]);
    ShardingPlan plan = ShardingPlan::replicated(g, mesh);
    for (OpId i = 0; i < g.num_ops(); ++i) {
      auto all = enumerate_strategies(g, i, mesh);
      plan.ops[i] = all[rng() % all.size()];
    }
    auto progs = lower(g, plan);
    EXPECT_TRUE(progs.ok()) << "seed " << seed;
    if (!progs.ok()) continue;
    out["random/" + std::to_string(seed) + "/" + mesh.to_string()] = digest(g, mesh, *progs);
    fetches += program_stats(g, *progs).fetches;
  }
  EXPECT_GT(fetches, 0) << "the random cases must cover halo fetches";
  return out;
}

TEST(LowerGolden, ProgramsMatchTheRecordedDigests) {
  auto got = compute();
  if (std::getenv("HEDDLE_UPDATE_GOLDEN")) {
    std::ofstream f(kGolden);
    f << "# case digest lines: FNV-1a 64 of every device's program text (tests/runtime/"
         "LowerGoldenTest.cpp)\n";
    for (const auto& [k, v] : got) f << k << " " << v << "\n";
    GTEST_SKIP() << "recorded " << got.size() << " digests in " << kGolden;
  }
  std::ifstream f(kGolden);
  ASSERT_TRUE(f) << kGolden;
  std::map<std::string, std::string> want;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.find(' ');
    want[line.substr(0, sp)] = line.substr(sp + 1);
  }
  EXPECT_EQ(want.size(), got.size());
  EXPECT_GE(got.size(), 30u);
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    ASSERT_NE(it, got.end()) << k;
    EXPECT_EQ(it->second, v) << k << ": lowered programs differ from the recorded ones";
  }
}

// The shared template: one instruction sequence for the whole mesh, each device's program
// instantiated from it (what lower() returns, and what run_threaded instantiates per thread).
TEST(LowerGolden, OneTemplateServesEveryDevice) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model("resnet-tiny", {}, mo);
  ASSERT_TRUE(fwd.ok());
  auto step = build_train_step(*fwd);
  ASSERT_TRUE(step.ok());
  const Graph& g = step->graph;
  auto spec = StrategySpec::parse("dp=2,tp=2");
  auto mesh = spec->mesh(4);
  auto plan = plan_from_strategy(g, *mesh, *spec);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  auto t = lower_template(g, plan->plan);
  auto progs = lower(g, plan->plan);
  ASSERT_TRUE(t.ok() && progs.ok());
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(t->instrs.size(), (*progs)[d].instrs.size());
    EXPECT_EQ(instantiate(g, *t, d).to_string(g, *mesh), (*progs)[d].to_string(g, *mesh));
    LowerOptions one;
    one.devices = {d};
    EXPECT_EQ((*lower(g, plan->plan, one))[0].to_string(g, *mesh), (*progs)[d].to_string(g, *mesh));
  }
  TensorMap feeds = testing::random_feeds(g, 3);
  auto a = run_threaded(g, *t, feeds), b = run_threaded(g, *progs, feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  for (ValueId v : g.outputs()) EXPECT_TRUE(a->at(v) == b->at(v));
}

}  // namespace
}  // namespace heddle
