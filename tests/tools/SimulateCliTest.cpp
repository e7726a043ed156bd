// `heddle simulate` and `heddle calibrate` through the binary: JSON keys, trace, exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle::testing {
namespace {

TEST(SimulateCli, JsonKeysAndTrace) {
  std::string trace = ::testing::TempDir() + "heddle_cost_trace_test.json";
  CliResult r = run_heddle(
      "simulate megatron-39.1b --cluster a100x32 --strategy dp=1,tp=8,pp=4,mb=1,"
      "schedule=interleaved:2,recompute=full,overlap=none --batch 8 --train --json --trace " +
      trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"step_time_s", "mfu", "tflops_per_device", "peak_memory_bytes", "memory_limit_bytes",
        "bubble_fraction", "comm_bytes", "strategy", "stages", "feasible"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["stages"].size(), 4u);
  EXPECT_GT(j["mfu"].get<double>(), 0);
  EXPECT_LT(j["mfu"].get<double>(), 1);
  std::ifstream in(trace);
  ASSERT_TRUE(in.good());
  auto t = nlohmann::json::parse(in);
  // 8 micro-batches x 4 stages x 2 chunks x (forward + backward) blocks.
  size_t blocks = 0, steps = 0, counters = 0;
  std::map<std::string, double> spans;  // named breakdown spans: seconds per name
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "breakdown")
      spans[e["name"].get<std::string>()] += e["dur"].get<double>() / 1e6;
    else if (e["ph"] == "X")
      (e["cat"] == "step" ? steps : blocks) += 1;
    if (e["ph"] == "C") ++counters;
  }
  // Inside the blocks, the step's categories as named spans, the idle time as bubbles: summed
  // over the 4 stages (dp=1, tp=8: one device each) they are the breakdown times 4.
  for (const char* name :
       {"compute", "recompute", "tp/sp collectives", "pipeline sends", "bubble"}) {
    ASSERT_TRUE(spans.count(name)) << name;
    std::string key = std::string(name) == "tp/sp collectives" ? "tp_sp_collectives"
                      : std::string(name) == "pipeline sends"  ? "pipeline_sends"
                                                               : name;
    EXPECT_NEAR(spans[name], 4 * j["breakdown"][key].get<double>(),
                1e-6 * j["step_time_s"].get<double>() * 4)
        << name;
  }
  EXPECT_EQ(blocks, 8u * 4 * 2 * 2);
  EXPECT_EQ(steps, 4u);                     // the optimizer step of each stage (dp=1: no reduction)
  EXPECT_EQ(counters, 4u + 8 * 4 * 2 * 2);  // memory at 0 and at every block start, per stage
  std::remove(trace.c_str());
  // The strategy printed re-simulates to the same step time.
  CliResult again = run_heddle("simulate megatron-39.1b --cluster a100x32 --strategy " +
                               j["strategy"].get<std::string>() + " --batch 8 --train --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["step_time_s"], j["step_time_s"]);
}

TEST(SimulateCli, BreakdownWorkloadAndMemory) {
  CliResult r = run_heddle(
      "simulate llama-tiny --cluster a100x8 --strategy dp=2,tp=2,pp=2,mb=1 --batch 8 --train "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  double step = j["step_time_s"].get<double>();
  EXPECT_NEAR(j["breakdown"]["total"].get<double>(), step, 1e-9 * step);
  for (const char* key : {"compute", "recompute", "tp_sp_collectives", "cp_ep_traffic",
                          "pipeline_sends", "bubble", "gradient_reduction", "optimizer",
                          "overlapped_pipeline_sends", "overlapped_gradient_reduction"})
    EXPECT_TRUE(j["breakdown"].contains(key)) << key;
  ASSERT_EQ(j["stages"].size(), 2u);
  for (const auto& s : j["stages"])
    EXPECT_NEAR(s["breakdown"]["total"].get<double>(), step, 1e-9 * step);
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["seq"], 32);
  EXPECT_EQ(j["tokens_per_step"], 8 * 32);
  EXPECT_NEAR(j["tokens_per_s_per_device"].get<double>(), 8 * 32 / step / 8, 1e-6);
  EXPECT_EQ(j["micro_batches"], 4);
  // The text restates the workload and says what the micro-batches are.
  CliResult t = run_heddle(
      "simulate llama-tiny --cluster a100x8 --strategy dp=2,tp=2,pp=2,mb=1 --batch 8 --train");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("batch 8 x seq 32 = 256 tokens per step"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("4 micro-batches of 1 sequence per data-parallel replica"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("breakdown"), std::string::npos);
  // --memory: the same step in less memory than it needs is infeasible, exit 1 saying so.
  CliResult m = run_heddle(
      "simulate llama-tiny --cluster a100x8 --strategy dp=2,tp=2,pp=2,mb=1 --batch 8 --train "
      "--memory 1KiB --json");
  EXPECT_EQ(m.exit_code, 1);
  auto mj = nlohmann::json::parse(m.out);
  EXPECT_EQ(mj["memory_limit_bytes"], 1024);
  EXPECT_FALSE(mj["feasible"].get<bool>());
  EXPECT_NE(m.err.find("but the device has 1.00 KiB"), std::string::npos) << m.err;
}

TEST(SimulateCli, BadInputExitsOne) {
  struct Case {
    std::string args, needle;
  };
  std::string file = ::testing::TempDir() + "heddle_cost_bad_cluster.json";
  {
    std::ofstream f(file);
    f << R"({"device": "a100", "count": 8, "intra_node": {"latency": 1e-5}})";
  }
  for (const Case& c :
       {Case{"simulate gpt-tiny --cluster tpux8 --strategy dp=8", "h100"},
        Case{"simulate gpt-tiny --cluster a100x8 --strategy dp=2,tp=2", "uses 4 devices"},
        Case{"simulate gpt-tiny --cluster " + file + " --strategy dp=8", "intra_node.bandwidth"},
        Case{"simulate no-such-model --cluster a100x8 --strategy dp=8", "gpt-tiny"}}) {
    CliResult r = run_heddle(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
  }
  std::remove(file.c_str());
  // A plan that does not fit still prints its prediction, then exits 1 saying what to change.
  CliResult big = run_heddle(
      "simulate gpt3-175b --cluster a100x64 --strategy dp=1,tp=8,pp=8,attention=eager --batch 64 "
      "--train --json");
  EXPECT_EQ(big.exit_code, 1) << big.err;
  EXPECT_FALSE(nlohmann::json::parse(big.out)["feasible"].get<bool>());
  EXPECT_NE(big.err.find("recompute"), std::string::npos) << big.err;
  CliResult fits = run_heddle(
      "simulate gpt3-175b --cluster a100x64 --strategy dp=1,tp=8,pp=8,recompute=full,"
      "attention=eager --batch 64 "
      "--train --json");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
}

// --executor predicts heddle's own executor: the training step from the autodiff graph plus the
// feed loads and output gathers, a different (here larger) figure than the closed form.
TEST(SimulateCli, ExecutorOption) {
  std::string base = "simulate gpt-tiny --cluster h100x2 --strategy tp=2 --batch 4 --train --json";
  CliResult plain = run_heddle(base);
  CliResult exec = run_heddle(base + " --executor");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(exec.exit_code, 0) << exec.err;
  double a = nlohmann::json::parse(plain.out)["step_time_s"].get<double>();
  double b = nlohmann::json::parse(exec.out)["step_time_s"].get<double>();
  EXPECT_GT(a, 0);
  EXPECT_NE(a, b);
  CliResult fwd =
      run_heddle("simulate gpt-tiny --cluster h100x2 --strategy tp=2 --batch 4 --json --executor");
  ASSERT_EQ(fwd.exit_code, 0) << fwd.err;
  EXPECT_LT(nlohmann::json::parse(fwd.out)["step_time_s"].get<double>(), b);
}

TEST(SimulateCli, CpuClusterSaysWhichProfile) {
  std::string profile = ::testing::TempDir() + "heddle_cost_cpu_profile_test.json";
  std::remove(profile.c_str());
  // HEDDLE_CPU_PROFILE is read by the child through the environment.
  setenv("HEDDLE_CPU_PROFILE", profile.c_str(), 1);
  CliResult none = run_heddle("simulate mlp --cluster cpu --strategy dp=2");
  EXPECT_NE(none.err.find("fallback"), std::string::npos) << none.err;
  CliResult cal = run_heddle("calibrate --quick --out " + profile);
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  CliResult used = run_heddle("simulate mlp --cluster cpu --strategy dp=2 --json");
  ASSERT_EQ(used.exit_code, 0) << used.err;
  // With --json stderr holds only log records (the cluster line is an info one); the source is
  // the result's `cluster_source`.
  EXPECT_NE(nlohmann::json::parse(used.out)["cluster_source"].get<std::string>().find(profile),
            std::string::npos)
      << used.out;
  CliResult text = run_heddle("simulate mlp --cluster cpu --strategy dp=2");
  EXPECT_NE(text.err.find(profile), std::string::npos) << text.err;
  unsetenv("HEDDLE_CPU_PROFILE");
  std::remove(profile.c_str());
}

}  // namespace
}  // namespace heddle::testing
