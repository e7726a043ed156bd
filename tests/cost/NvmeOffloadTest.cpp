// ZeRO-Infinity's NVMe tier (offload=optimizer+params:nvme): GPT-3 175B fits one DGX A100 with
// the states on NVMe where host memory cannot hold them; NVMe traffic is priced (overlapped per
// ZeRO-Infinity); bad input says why.
#include <gtest/gtest.h>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/Simulator.h"

namespace heddle::cost {
namespace {

model::ScalableModel gpt3_175b() { return *model::zoo_scalable_model("gpt3-175b", {}); }

Result<SimulationResult> run(const Cluster& c, const std::string& strategy) {
  SimulateOptions o;
  o.train = true;
  return simulate(gpt3_175b(), c, *StrategySpec::parse(strategy), o);
}

TEST(NvmeOffload, Gpt3OnOneDgxA100) {
  auto c = *cluster_preset("a100x8");
  EXPECT_NEAR(c.nvme_bytes * 8, 15.36e12, 1e9);  // DGX A100: 4 x 3.84 TB
  auto dram = run(c, "tp=8,zero=3,recompute=full,offload=optimizer+params");
  ASSERT_TRUE(dram.ok()) << dram.error().to_string();
  EXPECT_FALSE(dram->feasible);  // 18 bytes per parameter do not fit 2 TB of host memory
  EXPECT_GT(dram->host_memory_bytes, c.host_memory_bytes);
  auto nvme = run(c, "tp=8,zero=3,recompute=full,offload=optimizer+params:nvme");
  ASSERT_TRUE(nvme.ok()) << nvme.error().to_string();
  EXPECT_TRUE(nvme->feasible);
  EXPECT_LE(nvme->host_memory_bytes, c.host_memory_bytes);
  const double params = nvme->stages[0].parameters;  // per device: a tp=8 share
  EXPECT_NEAR(nvme->nvme_bytes, 14 * params, 1e-6 * params);
  EXPECT_NEAR(nvme->stages[0].host_bytes / params, 4, 0.5);
  // The optimizer reads 12 and writes 14 bytes per parameter on NVMe, overlapped with the DRAM
  // update: at least that I/O, and more than the DRAM-only optimizer.
  const double io = params * (12 / c.nvme_read_bandwidth + 14 / c.nvme_write_bandwidth);
  EXPECT_GE(nvme->breakdown.optimizer_s, io * (1 - 1e-9));
  EXPECT_GT(nvme->breakdown.optimizer_s, dram->breakdown.optimizer_s);
  EXPECT_GT(nvme->step_time_s, dram->step_time_s);
  // Without overlap the NVMe I/O and the update add up.
  auto serial = run(c, "tp=8,zero=3,recompute=full,offload=optimizer+params:nvme,overlap=none");
  ASSERT_TRUE(serial.ok());
  EXPECT_GT(serial->breakdown.optimizer_s, nvme->breakdown.optimizer_s);
  EXPECT_EQ(serial->strategy.find("offload=optimizer+params:nvme") != std::string::npos, true);
}

TEST(NvmeOffload, RefusedWithTheReason) {
  auto v100 = *cluster_preset("v100x8");  // p3.16xlarge: no local NVMe
  auto no_nvme = run(v100, "tp=8,zero=3,offload=optimizer+params:nvme");
  ASSERT_FALSE(no_nvme.ok());
  EXPECT_NE(no_nvme.error().message.find("gives none"), std::string::npos);
  auto zero2 = run(*cluster_preset("a100x8"), "tp=8,zero=2,offload=optimizer+params:nvme");
  ASSERT_FALSE(zero2.ok());
  EXPECT_NE(zero2.error().message.find("use zero=3"), std::string::npos);
  // A cluster file without host memory: offload is refused, naming the missing figures.
  auto bare = *cluster_from_json(
      R"({"device": "a100", "count": 8, "intra_node": {"bandwidth": 2.3e11}})", "bare.json");
  auto host = run(bare, "tp=8,zero=3,offload=optimizer");
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.error().message.find("host_memory_bytes and host_bandwidth"), std::string::npos)
      << host.error().message;
}

}  // namespace
}  // namespace heddle::cost
