// `heddle plan` end to end: the chosen plan is the fastest feasible configuration the simulator
// reports, it re-simulates to the same figures, and infeasible or malformed requests exit 1.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

TEST(PlanCli, ChoosesAFeasiblePlanThatSimulateReproduces) {
  std::string dir = ::testing::TempDir() + "/plan";
  auto r = run_heddle("plan gpt-tiny --cluster a100x8 --train --json --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"step_time_s", "mfu", "tflops_per_device", "peak_memory_bytes", "memory_limit_bytes",
        "bubble_fraction", "comm_bytes", "search_time_s", "strategy", "stages", "feasible"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["feasible"].get<bool>());
  EXPECT_LE(j["peak_memory_bytes"].get<double>(), j["memory_limit_bytes"].get<double>());
  // The strategy string reproduces the plan in `heddle simulate`.
  auto sim = run_heddle("simulate gpt-tiny --cluster a100x8 --train --json --strategy " +
                        j["strategy"].get<std::string>());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto s = nlohmann::json::parse(sim.out);
  EXPECT_DOUBLE_EQ(s["step_time_s"].get<double>(), j["step_time_s"].get<double>());
  // No hand-picked data-parallel or tensor-parallel layout beats it.
  for (const char* manual : {"dp=1,tp=8", "dp=2,tp=4", "dp=2,tp=2,pp=2", "dp=1,tp=4,pp=2"}) {
    auto m = run_heddle(std::string("simulate gpt-tiny --cluster a100x8 --train --json "
                                    "--strategy ") +
                        manual);
    ASSERT_EQ(m.exit_code, 0) << manual << m.err;
    auto mj = nlohmann::json::parse(m.out);
    if (mj["feasible"].get<bool>()) {
      EXPECT_LE(j["step_time_s"].get<double>(), mj["step_time_s"].get<double>() * (1 + 1e-9))
          << manual;
    }
  }
  for (const char* f : {"plan.json", "trace.json", "graph.dot"})
    EXPECT_TRUE(std::ifstream(dir + "/" + f).good()) << f;
}

TEST(PlanCli, PlansAnImportedOnnxModelWhosePlanRunsAndVerifies) {
  std::string data = testing::source_dir() + "/tests/data/";
  auto plan = run_heddle("plan " + data + "decoder.onnx --cluster a100x4 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  std::string strategy = nlohmann::json::parse(plan.out)["strategy"].get<std::string>();
  auto run = run_heddle("run " + data + "decoder.onnx --mesh 4 --strategy " + strategy +
                        " --input " + data + "decoder.in.npy --check --json");
  ASSERT_EQ(run.exit_code, 0) << strategy << "\n" << run.err;
  EXPECT_TRUE(nlohmann::json::parse(run.out)["ok"].get<bool>());
}

TEST(PlanCli, InfeasibleAndMalformedRequestsExitOne) {
  auto tiny = run_heddle("plan gpt-tiny --cluster a100x8 --train --memory 100KB");
  EXPECT_EQ(tiny.exit_code, 1);
  EXPECT_NE(tiny.err.find("no plan fits in 97.66 KiB per device; the smallest found needs"),
            std::string::npos)
      << tiny.err;
  auto bytes = run_heddle("plan gpt-tiny --cluster a100x8 --memory 12parsecs");
  EXPECT_EQ(bytes.exit_code, 1);
  EXPECT_NE(bytes.err.find("is not a size"), std::string::npos);
  auto cluster = run_heddle("plan gpt-tiny --cluster z80x8");
  EXPECT_EQ(cluster.exit_code, 1);
  auto pins = run_heddle("plan gpt-tiny --cluster a100x8 --strategy auto,qq=2");
  EXPECT_EQ(pins.exit_code, 1);
  EXPECT_NE(pins.err.find("valid keys"), std::string::npos) << pins.err;
}

}  // namespace
}  // namespace heddle
