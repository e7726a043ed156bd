// How a priced step is reported: the breakdown as JSON, the workload and micro-batch lines and the
// warning about a default batch, on hand-made results (no simulation).
#include <gtest/gtest.h>

#include "heddle/cost/StepReport.h"

namespace heddle::cost {
namespace {

SimulationResult result_of(int64_t devices, double step_time_s) {
  SimulationResult r;
  r.devices = devices;
  r.step_time_s = step_time_s;
  r.micro_batches = 4;
  r.micro_batch = 2;
  return r;
}

TEST(StepReport, BreakdownJsonHasEveryCategoryAndTheTotal) {
  StepBreakdown b;
  nlohmann::json j = breakdown_json(b);
  EXPECT_EQ(j.size(), b.entries().size() + 1);
  EXPECT_EQ(j["total"].get<double>(), b.total());
}

TEST(StepReport, WorkloadCountsTokensPerStepAndPerDevice) {
  model::ScalableModel src;
  src.batch = 8;
  src.seq = 1024;
  SimulationResult r = result_of(4, 2.0);
  EXPECT_EQ(workload_text(r, src),
            "batch 8 x seq 1024 = 8192 tokens per step, 1024 tokens/s per device");
  src.seq = 0;
  EXPECT_EQ(workload_text(r, src), "batch 8 samples per step, 1 samples/s per device");
  nlohmann::json j;
  add_step_json(j, r, src, "stages");
  EXPECT_EQ(j["batch"], 8);
  EXPECT_FALSE(j.contains("seq"));
  EXPECT_EQ(j["micro_batches"], 4);
  EXPECT_EQ(j["tokens_per_s_per_device"].get<double>(), 1.0);
}

TEST(StepReport, MicroBatchesLine) {
  EXPECT_EQ(micro_batches_text(result_of(1, 1)),
            "4 micro-batches of 2 sequences per data-parallel replica");
  SimulationResult one = result_of(1, 1);
  one.micro_batches = 1;
  one.micro_batch = 1;
  EXPECT_EQ(micro_batches_text(one), "1 micro-batch of 1 sequence per data-parallel replica");
}

TEST(StepReport, ADefaultBatchSmallerThanTheDevicesIsWarnedAbout) {
  model::ScalableModel src;
  src.batch = 2;
  EXPECT_EQ(workload_warnings(src, false, 8, true).size(), 1u);
  EXPECT_TRUE(workload_warnings(src, true, 8, true).empty());  // given: the user's choice
  EXPECT_TRUE(workload_warnings(src, false, 2, true).empty());
}

TEST(StepReport, SimulationJsonHasTheStepStagesAndSharedKeys) {
  model::ScalableModel src;
  src.batch = 8;
  src.seq = 16;
  SimulationResult r = result_of(2, 0.5);
  r.stages.resize(2);
  r.stages[1].layers = 3;
  r.feasible = true;
  nlohmann::json j = simulation_json(r, src);
  EXPECT_EQ(j["step_time_s"].get<double>(), 0.5);
  EXPECT_EQ(j["devices"], 2);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][1]["layers"], 3);
  EXPECT_TRUE(j["stages"][1].contains("breakdown"));  // add_step_json's per-stage keys
  EXPECT_EQ(j["batch"], 8);
  EXPECT_TRUE(j["feasible"].get<bool>());
}

TEST(StepReport, InfeasibilitySaysWhatOverflowsAndWhatToTry) {
  SimulationResult r = result_of(2, 0.5);
  r.feasible = true;
  EXPECT_FALSE(infeasibility(r).has_value());
  r.feasible = false;
  r.peak_memory_bytes = 2e9;
  r.memory_limit_bytes = 1e9;
  auto device = infeasibility(r);
  ASSERT_TRUE(device.has_value());
  EXPECT_NE(device->message.find("on its fullest device"), std::string::npos) << device->message;
  r.peak_memory_bytes = 5e8;  // the device fits: the host does not
  auto host = infeasibility(r);
  ASSERT_TRUE(host.has_value());
  EXPECT_NE(host->message.find("host memory"), std::string::npos) << host->message;
}

}  // namespace
}  // namespace heddle::cost
