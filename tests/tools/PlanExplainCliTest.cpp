// `heddle plan` explains itself: the step breakdown, `--compare` with the difference that
// explains the gap, ties in the ranking, the workload restated, warnings about a default batch,
// and forward plans that print only the keys that apply.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

TEST(PlanExplainCli, CompareSaysWhyThePlanWins) {
  const std::string base =
      "plan megatron-7.5b --cluster a100x16 --train --batch 32 --time-limit 20";
  const std::string mine = "dp=16,zero=1,recompute=full,overlap=none";
  auto r = run_heddle(base + " --json --compare " + mine + " --compare dp=2,tp=8,pp=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["compare"].size(), 2u);
  const auto& c = j["compare"][0];
  EXPECT_EQ(c["given"], mine);
  const double plan_step = j["step_time_s"].get<double>();
  const double my_step = c["step_time_s"].get<double>();
  EXPECT_GE(my_step, plan_step);  // the plan is the fastest that fits
  // The difference per category adds up to the gap in step time, and the largest one is named
  // first in `why`.
  double sum = 0, largest = 0;
  std::string largest_key;
  for (const auto& [key, v] : c["difference"].items()) {
    if (key.rfind("overlapped_", 0) == 0) continue;
    sum += v.get<double>();
    if (std::abs(v.get<double>()) > std::abs(largest)) largest = v.get<double>(), largest_key = key;
  }
  EXPECT_NEAR(sum, my_step - plan_step, 1e-6 * my_step);
  // dp=16 reduces gradients over two nodes' InfiniBand where the plan's dp=8 stays on NVLink,
  // and recompute=full runs the forward twice.
  EXPECT_EQ(largest_key, "gradient_reduction");
  EXPECT_EQ(c["why"].get<std::string>().rfind("gradient reduction +", 0), 0u) << c["why"];
  EXPECT_GT(c["difference"]["recompute"].get<double>(), 0);
  EXPECT_NE(c["why"].get<std::string>().find("recompute +"), std::string::npos);
  // A compared strategy re-simulates to the same step.
  auto sim = run_heddle(
      "simulate megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--strategy " +
      c["strategy"].get<std::string>());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto sj = nlohmann::json::parse(sim.out);
  EXPECT_EQ(sj["step_time_s"], c["step_time_s"]);
  // Simulate says who can run the strategy and how its ranks group, as plan does.
  EXPECT_NE(sj["runnable_by"].dump().find("heddle"), std::string::npos) << sim.out;
  // `mine` is dp=16 alone: one data-parallel group of all 16 ranks.
  ASSERT_EQ(sj["rank_groups"].size(), 1u) << sim.out;
  EXPECT_EQ(sj["rank_groups"]["dp"].size(), 1u) << sim.out;
  EXPECT_EQ(sj["rank_groups"]["dp"][0].size(), 16u) << sim.out;
  // JSON carries the ranking and the workload.
  ASSERT_GE(j["ranking"].size(), 2u);
  EXPECT_EQ(j["ranking"][0]["strategy"], j["strategy"]);
  EXPECT_EQ(j["batch"], 32);
  EXPECT_EQ(j["seq"], 2048);
  EXPECT_EQ(j["tokens_per_step"], 32 * 2048);
  EXPECT_NEAR(j["breakdown"]["total"].get<double>(), plan_step, 1e-9 * plan_step);
  EXPECT_TRUE(j["warnings"].empty());
  // The text: the breakdowns side by side and one `why` line per strategy.
  auto t = run_heddle(base + " --compare " + mine);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  for (const char* needle :
       {"compare (seconds per device)", "yours #1", "why (yours minus the plan", "breakdown",
        "workload   batch 32 x seq 2048", "ranking"})
    EXPECT_NE(t.out.find(needle), std::string::npos) << needle << "\n" << t.out;
  // A strategy that cannot be priced names the --compare value.
  auto bad = run_heddle(base + " --compare dp=3");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--compare dp=3"), std::string::npos) << bad.err;
}

TEST(PlanExplainCli, TiesSayWhatDiffers) {
  const std::string dir = ::testing::TempDir() + "heddle_plan_explain_out";
  std::filesystem::remove_all(dir);
  auto r = run_heddle(
      "plan megatron-7.5b --cluster a100x16 --train --batch 32 --time-limit 20 "
      "--out " +
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // plan.json restates the workload and carries the breakdown (per stage too) and the ranking.
  std::ifstream in(dir + "/plan.json");
  ASSERT_TRUE(in.good());
  auto plan = nlohmann::json::parse(in);
  EXPECT_EQ(plan["batch"], 32);
  EXPECT_EQ(plan["tokens_per_step"], 32 * 2048);
  EXPECT_NEAR(plan["breakdown"]["total"].get<double>(), plan["step_time_s"].get<double>(),
              1e-9 * plan["step_time_s"].get<double>());
  EXPECT_TRUE(plan["stage_meshes"][0].contains("breakdown"));
  EXPECT_GE(plan["ranking"].size(), 2u);
  std::filesystem::remove_all(dir);
  // zero=1 and zero=2 price the same step here; the ranking says so and which needs less memory.
  size_t tie = r.out.find("ties with the row above: zero ");
  ASSERT_NE(tie, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs less memory", tie), std::string::npos);
}

TEST(PlanExplainCli, DefaultBatchWarnsAndForwardPlansHoldOnlyWhatApplies) {
  auto one = run_heddle("plan megatron-7.5b --cluster a100x16 --train --time-limit 20 --json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto j = nlohmann::json::parse(one.out);
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_NE(j["warnings"][0].get<std::string>().find("give --batch"), std::string::npos);
  EXPECT_NE(one.err.find("warning: the batch is 1"), std::string::npos);
  // Given explicitly, batch 1 is the user's choice: no warning.
  auto given =
      run_heddle("plan megatron-7.5b --cluster a100x16 --train --time-limit 20 --json --batch 1");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_TRUE(nlohmann::json::parse(given.out)["warnings"].empty());
  // A forward plan: no zero, recompute or schedule in the strategy or the text.
  auto fwd = run_heddle("plan gpt3-1.3b --cluster a100x8 --batch 8 --time-limit 20");
  ASSERT_EQ(fwd.exit_code, 0) << fwd.err;
  size_t eol = fwd.out.find('\n');
  std::string first = fwd.out.substr(0, eol);
  for (const char* key : {"zero=", "recompute=", "schedule="})
    EXPECT_EQ(fwd.out.find(key), std::string::npos) << key << "\n" << fwd.out;
  EXPECT_NE(fwd.out.find("micro-batch"), std::string::npos);
  // The search line counts the space and the simulations apart (never "N simulated (of M)").
  EXPECT_EQ(fwd.out.find("(of "), std::string::npos) << fwd.out;
  EXPECT_NE(fwd.out.find("configurations in the space"), std::string::npos);
}

TEST(PlanExplainCli, OverlapIsAPlanOption) {
  auto off = run_heddle(
      "plan megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--strategy auto,pp=4,tp=1,overlap=none --time-limit 20");
  auto on = run_heddle(
      "plan megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--strategy auto,pp=4,tp=1 --time-limit 20 --overlap");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  ASSERT_EQ(on.exit_code, 0) << on.err;
  auto a = nlohmann::json::parse(off.out), b = nlohmann::json::parse(on.out);
  EXPECT_TRUE(b["overlap"].get<bool>());
  EXPECT_LT(b["step_time_s"].get<double>(), a["step_time_s"].get<double>());
  EXPECT_EQ(b["breakdown"]["pipeline_sends"].get<double>(), 0);
  EXPECT_GT(b["breakdown"]["overlapped_pipeline_sends"].get<double>(), 0);
}

TEST(PlanExplainCli, HelpNamesEveryModelKindAndTheNewOptions) {
  for (const char* cmd : {"plan", "simulate", "run", "show"}) {
    auto h = run_heddle(std::string(cmd) + " --help");
    EXPECT_EQ(h.exit_code, 0) << cmd;
    for (const char* kind : {"zoo name", ".onnx", "text-IR"})
      EXPECT_NE(h.out.find(kind), std::string::npos) << cmd << " --help lacks " << kind;
    for (const char* flag : {"--ffn", "--kv-heads", "--experts", "--top-k"})
      EXPECT_NE(h.out.find(flag), std::string::npos) << cmd << " --help lacks " << flag;
  }
  auto plan = run_heddle("plan --help");
  for (const char* flag : {"--compare", "--overlap"})
    EXPECT_NE(plan.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(run_heddle("simulate --help").out.find("--memory"), std::string::npos);
}

TEST(PlanExplainCli, SearchTriesSequenceParallel) {
  auto r = run_heddle(
      "plan megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--time-limit 20");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::string with_sp;
  for (const auto& c : j["ranking"])
    if (c["strategy"].get<std::string>().find("sp=on") != std::string::npos) {
      with_sp = c["strategy"].get<std::string>();
      break;
    }
  ASSERT_FALSE(with_sp.empty()) << j["ranking"].dump(1);
  // It is in the ranking because it beat the same layout without sp.
  std::string without = with_sp.substr(0, with_sp.find(",sp=on"));
  auto a = run_heddle(
      "simulate megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--strategy " +
      with_sp);
  auto b = run_heddle(
      "simulate megatron-7.5b --cluster a100x16 --train --batch 32 --json "
      "--strategy " +
      without);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_LT(ja["step_time_s"].get<double>(), jb["step_time_s"].get<double>());
  EXPECT_LT(ja["peak_memory_bytes"].get<double>(), jb["peak_memory_bytes"].get<double>());
}

}  // namespace
}  // namespace heddle
