// `heddle simulate` and `heddle calibrate` through the binary: JSON keys, trace, exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle::testing {
namespace {

TEST(SimulateCli, JsonKeysAndTrace) {
  std::string trace = "/tmp/heddle_cost_trace_test.json";
  CliResult r = run_heddle(
      "simulate megatron-39.1b --cluster a100x32 --strategy dp=1,tp=8,pp=4,mb=1,"
      "schedule=interleaved:2,recompute=full --batch 8 --train --json --trace " +
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
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") (e["cat"] == "step" ? steps : blocks) += 1;
    if (e["ph"] == "C") ++counters;
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

TEST(SimulateCli, BadInputExitsOne) {
  struct Case {
    std::string args, needle;
  };
  std::string file = "/tmp/heddle_cost_bad_cluster.json";
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
      "simulate gpt3-175b --cluster a100x64 --strategy dp=1,tp=8,pp=8 --batch 64 --train --json");
  EXPECT_EQ(big.exit_code, 1) << big.err;
  EXPECT_FALSE(nlohmann::json::parse(big.out)["feasible"].get<bool>());
  EXPECT_NE(big.err.find("recompute"), std::string::npos) << big.err;
  CliResult fits = run_heddle(
      "simulate gpt3-175b --cluster a100x64 --strategy dp=1,tp=8,pp=8,recompute=full --batch 64 "
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
  std::string profile = "/tmp/heddle_cost_cpu_profile_test.json";
  std::remove(profile.c_str());
  // HEDDLE_CPU_PROFILE is read by the child through the environment.
  setenv("HEDDLE_CPU_PROFILE", profile.c_str(), 1);
  CliResult none = run_heddle("simulate mlp --cluster cpu --strategy dp=2");
  EXPECT_NE(none.err.find("fallback"), std::string::npos) << none.err;
  CliResult cal = run_heddle("calibrate --quick --out " + profile);
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  CliResult used = run_heddle("simulate mlp --cluster cpu --strategy dp=2 --json");
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_NE(used.err.find(profile), std::string::npos) << used.err;
  unsetenv("HEDDLE_CPU_PROFILE");
  std::remove(profile.c_str());
}

}  // namespace
}  // namespace heddle::testing
