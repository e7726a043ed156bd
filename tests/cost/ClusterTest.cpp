// Device presets, cluster presets and files, and the calibration profile round trip.
#include <gtest/gtest.h>

#include "heddle/cost/Calibrate.h"
#include "heddle/cost/Cluster.h"

namespace heddle::cost {
namespace {

TEST(Devices, PresetsFromDatasheets) {
  auto a = find_device("A100-80GB");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->peak_flops, 312e12);
  EXPECT_EQ(a->memory_bytes, 80e9);
  auto h = find_device("h200");
  ASSERT_TRUE(h.ok());
  EXPECT_GT(h->memory_bandwidth, find_device("h100")->memory_bandwidth);
  auto bad = find_device("tpu");
  ASSERT_FALSE(bad.ok());
  for (const char* name : {"v100", "a100-40gb", "a100-80gb", "h100", "h200"})
    EXPECT_NE(bad.error().message.find(name), std::string::npos) << bad.error().message;
  // The efficiency curve rises with every dim and stays below its ceiling.
  EXPECT_LT(a->gemm_fraction(128, 4096, 4096), a->gemm_fraction(4096, 4096, 4096));
  EXPECT_LT(a->gemm_fraction(4096, 4096, 4096), a->gemm_efficiency);
}

TEST(Clusters, PresetsAndUnknownNames) {
  auto v = cluster_preset("v100x64");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->count, 64);
  EXPECT_EQ(v->devices_per_node, 8);
  EXPECT_NEAR(v->inter_node.bandwidth * 8, 25e9 / 8, 1);  // 25 Gb/s per node, 8 GPUs share it
  EXPECT_EQ(v->stage_link(8).name, v->inter_node.name);
  EXPECT_EQ(v->stage_link(4).name, v->intra_node.name);
  for (const char* bad : {"b200x8", "a100", "a100x", "a100xfour", "x8"}) {
    auto c = resolve_cluster(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.error().message.find("a100"), std::string::npos) << c.error().message;
  }
}

TEST(Clusters, FilesNameTheBadField) {
  auto ok = cluster_from_json(
      R"({"name": "lab", "device": "h100", "count": 16,
          "intra_node": {"bandwidth": 3e11, "latency": 1e-5},
          "inter_node": {"bandwidth": 5e10}})",
      "lab.json");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->count, 16);
  EXPECT_EQ(ok->inter_node.bandwidth, 5e10);
  struct Case {
    const char* text;
    const char* field;
  };
  for (Case c :
       {Case{R"({"device": "h100", "intra_node": {"bandwidth": 1}})", "count"},
        Case{R"({"device": "h100", "count": 8, "intra_node": {"bandwidth": "fast"}})",
             "intra_node.bandwidth"},
        Case{R"({"count": 8, "intra_node": {"bandwidth": 1}})", "device"},
        Case{R"({"device": {"peak_flops": 1e12, "memory_bytes": 1e9}, "count": 8,
                          "intra_node": {"bandwidth": 1}})",
             "device.memory_bandwidth"},
        Case{R"({"device": "h100", "count": 8})", "intra_node"},
        Case{R"({"device": "h100", "count": -2, "intra_node": {"bandwidth": 1}})", "count"}}) {
    auto r = cluster_from_json(c.text, "bad.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(std::string("'") + c.field + "'"), std::string::npos)
        << r.error().message;
  }
  EXPECT_FALSE(cluster_from_json("{not json", "x.json").ok());
}

TEST(Calibration, MeasuresAndRoundTrips) {
  CalibrateOptions o;
  o.gemm_sizes = {16, 32, 64};
  o.min_seconds = 0.002;
  o.threads = 2;
  o.bandwidth_bytes = 1 << 20;
  CpuCalibration cal = calibrate_cpu(o);
  ASSERT_EQ(cal.gemm.size(), 3u);
  for (auto& [n, f] : cal.gemm) EXPECT_GT(f, 0) << n;
  EXPECT_GT(cal.memory_bandwidth, 0);
  EXPECT_GT(cal.allreduce_bandwidth, 0);
  EXPECT_GT(cal.allreduce_latency, 0);
  EXPECT_EQ(cal.cluster.count, 2);
  auto back = cluster_from_json(cluster_to_json(cal.cluster), "cpu.json");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  Cluster expected = cal.cluster;
  expected.source = back->source;
  EXPECT_EQ(*back, expected);
}

}  // namespace
}  // namespace heddle::cost
