// Device presets, cluster presets and files, and the calibration profile round trip.
#include <gtest/gtest.h>

#include "heddle/cost/Calibrate.h"
#include "heddle/cost/Cluster.h"
#include "heddle/cost/ComputeCost.h"
#include "heddle/cost/KernelRates.h"
#include "heddle/ir/TextParser.h"

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

TEST(Clusters, KernelRatesInFiles) {
  auto ok = cluster_from_json(
      R"({"device": {"peak_flops": 1e11, "memory_bytes": 1e9, "memory_bandwidth": 1e10,
                     "batched_gemm": false, "kernel_element_s": {"softmax": 2e-8, "add": 1e-9,
                                          "elementwise_grad:gelu": 3e-8}},
          "count": 2, "intra_node": {"bandwidth": 1e9}})",
      "cpu.json");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->device.kernel_element_s.at("softmax"), 2e-8);
  EXPECT_EQ(ok->device.kernel_element_s.at("elementwise_grad:gelu"), 3e-8);
  EXPECT_FALSE(ok->device.batched_gemm);
  auto back = cluster_from_json(cluster_to_json(*ok), "again.json");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->device, ok->device);
  struct Case {
    const char* rates;
    const char* field;
  };
  for (Case c : {Case{R"({"sofmax": 1e-8})", "device.kernel_element_s.sofmax"},
                 Case{R"({"add": "slow"})", "device.kernel_element_s.add"},
                 Case{R"({"add": -1})", "device.kernel_element_s.add"},
                 Case{R"([1e-8])", "device.kernel_element_s"}}) {
    std::string text = std::string(R"({"device": {"peak_flops": 1e11, "memory_bytes": 1e9,
        "memory_bandwidth": 1e10, "kernel_element_s": )") +
                       c.rates + R"(}, "count": 2, "intra_node": {"bandwidth": 1e9}})";
    auto r = cluster_from_json(text, "bad.json");
    ASSERT_FALSE(r.ok()) << c.rates;
    EXPECT_NE(r.error().message.find(std::string("'") + c.field + "'"), std::string::npos)
        << r.error().message;
  }
}

// Per-kind rates are measured for the kinds the zoo's training steps use, and an op of a listed
// kind costs the launch plus its points times the rate.
TEST(Calibration, KernelRatesPerOpKind) {
  KernelRateOptions o;
  o.repeats = 1;
  o.launch_s = 1e-7;
  o.models = {"gpt-tiny"};
  auto rates = measure_kernel_rates(o);
  for (const char* kind : {"softmax", "layernorm", "add", "gelu", "adamw", "cross_entropy"}) {
    ASSERT_TRUE(rates.count(kind)) << kind;
    EXPECT_GT(rates.at(kind), 0) << kind;
    EXPECT_LT(rates.at(kind), 1e-5) << kind;  // microseconds per point would be absurd
  }
  EXPECT_FALSE(rates.count("einsum"));                // the GEMM curve prices contractions
  EXPECT_TRUE(rates.count("elementwise_grad:gelu"));  // per derivative function too
  auto g = parse_graph(
      "graph g {\n input %a: f32[64, 128]\n %b: f32[64, 128] = softmax{axis=1} [i=64] "
      "%a(i, 0)[1, 128] -> (i, 0)[1, 128]\n output %b\n}",
      "t");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  DeviceProfile d;
  d.peak_flops = 1e11;
  d.memory_bandwidth = 1e10;
  d.launch_s = 1e-6;
  OpTime roof = op_time(*g, 0, g->op(0).space.box(), d);
  EXPECT_FALSE(roof.measured);
  d.kernel_element_s["softmax"] = 1e-8;
  OpTime t = op_time(*g, 0, g->op(0).space.box(), d);
  EXPECT_TRUE(t.measured);
  EXPECT_DOUBLE_EQ(t.seconds, 1e-6 + 64 * 128 * 1e-8);  // every element of the 64 rows
}

TEST(Calibration, MeasuresAndRoundTrips) {
  CalibrateOptions o;
  o.kernel_rates = false;  // KernelRatesPerOpKind covers them
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
