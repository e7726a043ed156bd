// Lowered programs do not change when lowering's machinery does: the text of every device's
// program, for zoo models (forward and training steps) under the strategy language and for random
// graphs under random strategies (halos, 1-3 axis meshes), compared line by line with the text
// recorded in tests/data/lowered/<case>.txt (first recorded from the per-device lowering that
// lowered each device separately). A difference prints the first differing line of both. To
// record new text after an intended change of the programs:
// HEDDLE_UPDATE_GOLDEN=1 ./build/tests/runtime/test_runtime --gtest_filter='LowerGolden.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
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

const char* kGoldenDir = HEDDLE_SOURCE_DIR "/tests/data/lowered/";

// Every device's program text, in device order.
std::string text(const Graph& g, const Mesh& mesh, const std::vector<DeviceProgram>& progs) {
  std::string t;
  for (const auto& p : progs) t += p.to_string(g, mesh);
  return t;
}

// `gpt-tiny/train/dp=2,tp=2` as a file name: `gpt-tiny.train.dp=2,tp=2.txt`.
std::string file_of(std::string name) {
  for (char& c : name)
    if (c == '/') c = '.';
  return std::string(kGoldenDir) + name + ".txt";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Empty when `got` equals `want`; else where they first differ, with both lines.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream w(want), g(got);
  std::string lw, lg;
  for (int line = 1;; ++line) {
    bool hw = static_cast<bool>(std::getline(w, lw)), hg = static_cast<bool>(std::getline(g, lg));
    if (!hw && !hg) return want == got ? "" : "the texts differ in their final newline";
    if (hw != hg || lw != lg)
      return "line " + std::to_string(line) + ":\n  recorded: " + (hw ? lw : "<end of file>") +
             "\n  lowered:  " + (hg ? lg : "<end of file>");
  }
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
        text(graph, *mesh, *progs);
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
    out["random/" + std::to_string(seed) + "/" + mesh.to_string()] = text(g, mesh, *progs);
    fetches += program_stats(g, *progs).fetches;
  }
  EXPECT_GT(fetches, 0) << "the random cases must cover halo fetches";
  return out;
}

TEST(LowerGolden, ProgramsMatchTheRecordedText) {
  auto got = compute();
  EXPECT_GE(got.size(), 30u);
  if (std::getenv("HEDDLE_UPDATE_GOLDEN")) {
    std::filesystem::remove_all(kGoldenDir);
    std::filesystem::create_directories(kGoldenDir);
    for (const auto& [k, v] : got) std::ofstream(file_of(k), std::ios::binary) << v;
    GTEST_SKIP() << "recorded " << got.size() << " programs in " << kGoldenDir;
  }
  size_t recorded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir))
    recorded += entry.path().extension() == ".txt";
  EXPECT_EQ(recorded, got.size()) << "cases in " << kGoldenDir << " and in compute() differ";
  for (const auto& [k, v] : got) {
    std::string want = read_file(file_of(k));
    ASSERT_FALSE(want.empty()) << file_of(k) << " is missing: record it (see the file comment)";
    EXPECT_EQ(first_difference(want, v), "")
        << k << ": lowered programs differ from " << file_of(k);
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
