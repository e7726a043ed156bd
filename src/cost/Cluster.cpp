#include "heddle/cost/Cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "heddle/ir/OpKind.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Keys.h"
#include "heddle/support/Limits.h"

namespace heddle::cost {

size_t LinkClass::hash() const {
  size_t h = std::hash<std::string>()(name);
  hash_combine(h, bandwidth);
  hash_combine(h, latency);
  return h;
}

std::string LinkClass::to_string() const {
  return fmt::format("{} ({:g} GB/s, {:g} us)", name, bandwidth / 1e9, latency * 1e6);
}

const LinkClass& Cluster::axis_link(const Mesh& mesh, int64_t a) const {
  HEDDLE_ASSERT(a >= 0 && a < mesh.rank()) << "axis " << a;
  int64_t span = 1;
  for (int64_t i = a; i < mesh.rank(); ++i) span *= mesh.size(i);
  return span <= devices_per_node ? intra_node : inter_node;
}

const LinkClass& Cluster::stage_link(int64_t stage_devices) const {
  return stage_devices < devices_per_node ? intra_node : inter_node;
}

size_t Cluster::hash() const {
  size_t h = std::hash<std::string>()(name);
  hash_combine(h, device);
  hash_combine(h, count);
  hash_combine(h, devices_per_node);
  hash_combine(h, intra_node.hash());
  hash_combine(h, inter_node.hash());
  hash_combine(h, host_memory_bytes);
  hash_combine(h, host_bandwidth);
  hash_combine(h, host_memory_bandwidth);
  return h;
}

std::string Cluster::to_string() const {
  return fmt::format(
      "cluster {}: {} x {} ({} per node)\n  device: {}\n  intra-node: {}\n  inter-node: {}\n"
      "  source: {}\n",
      name, count, device.name, devices_per_node, device.to_string(), intra_node.to_string(),
      inter_node.to_string(), source);
}

namespace {

// Links per device preset (docs/cost-model.md): the intra-node figure is the measured NCCL ring
// all-reduce bus bandwidth (nccl-tests) where published, else the datasheet NVLink bandwidth
// scaled by A100's measured/datasheet ratio (230/600); between nodes one 200 Gb/s HDR (A100) or
// 400 Gb/s NDR (H100, H200) port per GPU; V100 nodes share one 25 Gb/s link (Alpa's clusters).
// Host memory per device: the node's system memory over its 8 GPUs (DGX A100 and DGX H100
// datasheets: 2 TB; AWS p3.16xlarge: 488 GiB), and its PCIe link per direction at 80% of the
// x16 rate (Gen3 16, Gen4 32, Gen5 64 GB/s); its DRAM bandwidth over 8 (two sockets: DGX A100
// 2 x EPYC 7742, 8 DDR4-3200 channels each, 410 GB/s; DGX H100 2 x Xeon 8480C, 8 DDR5-4800
// channels each, 614 GB/s; p3.16xlarge 2 x Xeon E5-2686 v4, 4 DDR4-2400 channels each, 154 GB/s).
struct Links {
  LinkClass intra, inter;
  double host_bytes = 0, host_bandwidth = 0, host_dram = 0;
};

Links preset_links(const std::string& device) {
  if (device == "v100")
    return {{"nvlink2", 300e9 * 230 / 600, 1e-5},
            {"ethernet-25g", 25e9 / 8 / 8, 3e-5},
            488.0 * (1 << 30) / 8,
            0.8 * 16e9,
            154e9 / 8};
  if (device.rfind("a100", 0) == 0)
    return {{"nvlink3", 230e9, 1e-5}, {"ib-hdr", 25e9, 1e-5}, 2e12 / 8, 0.8 * 32e9, 410e9 / 8};
  return {{"nvlink4", 370e9, 1e-5}, {"ib-ndr", 50e9, 1e-5}, 2e12 / 8, 0.8 * 64e9, 614e9 / 8};
}

Diagnostic field_error(const std::string& file, const std::string& field, const std::string& why) {
  return Diagnostic(SourceLoc{file, 0, 0}, fmt::format("cluster field '{}' {}", field, why));
}

Result<double> number(const nlohmann::json& j, const std::string& file, const std::string& path,
                      const char* key, bool required, double fallback, bool positive = true) {
  std::string field = path.empty() ? key : path + "." + key;
  if (!j.contains(key)) {
    if (required) return field_error(file, field, "is missing");
    return fallback;
  }
  const auto& v = j.at(key);
  if (!v.is_number()) return field_error(file, field, "must be a number, got " + v.dump());
  double x = v.get<double>();
  if (!std::isfinite(x)) return field_error(file, field, "must be finite, got " + v.dump());
  if (positive ? !(x > 0) : !(x >= 0))
    return field_error(file, field,
                       fmt::format("must be {}, got {}", positive ? "> 0" : ">= 0", x));
  return x;
}

std::vector<std::string> keys_of(const nlohmann::json& o) {
  std::vector<std::string> keys;
  for (const auto& item : o.items()) keys.push_back(item.key());
  return keys;
}

Result<LinkClass> link_from_json(const nlohmann::json& j, const std::string& file,
                                 const std::string& path) {
  if (!j.contains(path)) return field_error(file, path, "is missing");
  const auto& o = j.at(path);
  if (!o.is_object())
    return field_error(file, path, "must be an object with bandwidth and latency");
  HEDDLE_TRY(check_keys(keys_of(o), {"name", "bandwidth", "latency"}, file, "'" + path + "'"));
  LinkClass l;
  l.name = o.contains("name") && o.at("name").is_string() ? o.at("name").get<std::string>() : path;
  auto bw = number(o, file, path, "bandwidth", true, 0);
  HEDDLE_TRY(bw);
  auto lat = number(o, file, path, "latency", false, 1e-5, false);
  HEDDLE_TRY(lat);
  l.bandwidth = *bw;
  l.latency = *lat;
  return l;
}

}  // namespace

Result<Cluster> cluster_preset(std::string_view spec) {
  std::string s(spec);
  size_t x = s.rfind('x');
  std::string known;
  for (const auto& d : device_presets()) known += (known.empty() ? "" : ", ") + d.name + "xN";
  if (x == std::string::npos || x == 0 || x + 1 == s.size())
    return Diagnostic(fmt::format(
        "unknown cluster '{}'; use <device>x<count> ({}), 'cpu', or a JSON cluster file", spec,
        known));
  auto dev = find_device(s.substr(0, x));
  if (!dev.ok())
    return Diagnostic(fmt::format("unknown cluster '{}': {}; clusters are {}, 'cpu' or a JSON file",
                                  spec, dev.error().message, known));
  int64_t count = 0;
  for (size_t i = x + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || count > (int64_t{1} << 40))
      return Diagnostic(fmt::format("cluster '{}': the device count '{}' is not a positive integer",
                                    spec, s.substr(x + 1)));
    count = count * 10 + (s[i] - '0');
  }
  if (count < 1)
    return Diagnostic(fmt::format("cluster '{}': the device count must be >= 1", spec));
  if (count > limits::kMaxClusterDevices)
    return Diagnostic(fmt::format(
        "cluster '{}': {} devices is more than the {} heddle plans and simulates (a simulation "
        "costs about 0.2 ms of CPU per device)",
        spec, count, limits::kMaxClusterDevices));
  Cluster c;
  c.name = s;
  c.device = *dev;
  c.count = count;
  c.devices_per_node = 8;
  Links l = preset_links(dev->name);
  c.intra_node = l.intra;
  c.inter_node = l.inter;
  c.host_memory_bytes = l.host_bytes;
  c.host_bandwidth = l.host_bandwidth;
  c.host_memory_bandwidth = l.host_dram;
  c.source = "preset (published figures, docs/cost-model.md)";
  return c;
}

Result<Cluster> cluster_from_json(std::string_view text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers beyond double
    return Diagnostic(SourceLoc{file, 0, 0}, std::string("malformed cluster JSON: ") + e.what());
  }
  if (!j.is_object()) return Diagnostic(SourceLoc{file, 0, 0}, "a cluster file is a JSON object");
  HEDDLE_TRY(check_keys(keys_of(j),
                        {"name", "device", "count", "devices_per_node", "intra_node", "inter_node",
                         "host_memory_bytes", "host_bandwidth", "host_memory_bandwidth"},
                        file, ""));
  Cluster c;
  c.name = j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>() : file;
  if (!j.contains("device")) return field_error(file, "device", "is missing");
  const auto& d = j.at("device");
  if (d.is_string()) {
    auto dev = find_device(d.get<std::string>());
    if (!dev.ok())
      return Diagnostic(SourceLoc{file, 0, 0}, "cluster field 'device': " + dev.error().message);
    c.device = *dev;
  } else if (d.is_object()) {
    HEDDLE_TRY(check_keys(keys_of(d),
                          {"name",
                           "peak_flops",
                           "memory_bytes",
                           "memory_bandwidth",
                           "launch_s",
                           "vector_flops",
                           "tdp_watts",
                           "idle_watts",
                           "elementwise_bandwidth",
                           "gemm_efficiency",
                           "gemm_knee",
                           "memory_efficiency",
                           "element_bytes",
                           "kernel_element_s",
                           "fuses_elementwise",
                           "batched_gemm",
                           "fp8_flops",
                           "tf32_flops",
                           "attention_efficiency",
                           "fp8_gemm_efficiency"},
                          file, "'device'"));
    DeviceProfile p;
    p.name =
        d.contains("name") && d.at("name").is_string() ? d.at("name").get<std::string>() : "custom";
    struct F {
      const char* key;
      double* dst;
      bool required;
      bool positive;  // else >= 0: 0 means "not set" (DeviceProfile)
    };
    for (F f :
         {F{"peak_flops", &p.peak_flops, true, true},
          F{"memory_bytes", &p.memory_bytes, true, true},
          F{"memory_bandwidth", &p.memory_bandwidth, true, true},
          F{"launch_s", &p.launch_s, false, true}, F{"vector_flops", &p.vector_flops, false, false},
          F{"tdp_watts", &p.tdp_watts, false, false}, F{"idle_watts", &p.idle_watts, false, false},
          F{"elementwise_bandwidth", &p.elementwise_bandwidth, false, false},
          F{"gemm_efficiency", &p.gemm_efficiency, false, true},
          F{"gemm_knee", &p.gemm_knee, false, true},
          F{"memory_efficiency", &p.memory_efficiency, false, true},
          F{"element_bytes", &p.element_bytes, false, true},
          F{"fp8_flops", &p.fp8_flops, false, false}, F{"tf32_flops", &p.tf32_flops, false, false},
          F{"attention_efficiency", &p.attention_efficiency, false, false},
          F{"fp8_gemm_efficiency", &p.fp8_gemm_efficiency, false, true}}) {
      auto v = number(d, file, "device", f.key, f.required, *f.dst, f.positive);
      HEDDLE_TRY(v);
      *f.dst = *v;
    }
    if (d.contains("kernel_element_s")) {
      const auto& k = d.at("kernel_element_s");
      if (!k.is_object())
        return field_error(file, "device.kernel_element_s",
                           "must be an object of seconds per point by op kind");
      for (const auto& [kind, v] : k.items()) {
        if (!parse_op_kind(kind.substr(0, kind.find(':'))))
          return field_error(file, "device.kernel_element_s." + kind, "is not an op kind");
        auto rate = number(k, file, "device.kernel_element_s", kind.c_str(), true, 0);
        HEDDLE_TRY(rate);
        p.kernel_element_s[kind] = *rate;
      }
    }
    for (auto [key, dst] :
         {std::pair<const char*, bool*>{"fuses_elementwise", &p.fuses_elementwise},
          {"batched_gemm", &p.batched_gemm}}) {
      if (!d.contains(key)) continue;
      if (!d.at(key).is_boolean())
        return field_error(file, std::string("device.") + key, "must be true or false");
      *dst = d.at(key).get<bool>();
    }
    c.device = p;
  } else {
    return field_error(file, "device", "must be a preset name or an object");
  }
  auto count = number(j, file, "", "count", true, 0);
  HEDDLE_TRY(count);
  auto per_node = number(j, file, "", "devices_per_node", false, 8);
  HEDDLE_TRY(per_node);
  // Range-check before converting: a double beyond int64 does not convert (undefined behaviour).
  constexpr double kMaxCount = 1 << 30;
  for (auto [key, v] : {std::pair{"count", *count}, std::pair{"devices_per_node", *per_node}})
    if (v != std::floor(v) || v > kMaxCount)
      return field_error(file, key, fmt::format("must be an integer from 1 to 2^30, got {}", v));
  c.count = static_cast<int64_t>(*count);
  for (auto [key, dst] :
       {std::pair<const char*, double*>{"host_memory_bytes", &c.host_memory_bytes},
        {"host_bandwidth", &c.host_bandwidth},
        {"host_memory_bandwidth", &c.host_memory_bandwidth}}) {
    auto v = number(j, file, "", key, false, 0, false);
    HEDDLE_TRY(v);
    *dst = *v;
  }
  c.devices_per_node = static_cast<int64_t>(*per_node);
  auto intra = link_from_json(j, file, "intra_node");
  HEDDLE_TRY(intra);
  c.intra_node = *intra;
  if (j.contains("inter_node")) {
    auto inter = link_from_json(j, file, "inter_node");
    HEDDLE_TRY(inter);
    c.inter_node = *inter;
  } else {
    c.inter_node = c.intra_node;
  }
  c.source = "file " + file;
  return c;
}

std::string cpu_profile_path() {
  if (const char* p = std::getenv("HEDDLE_CPU_PROFILE"); p && *p) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.config/heddle/cpu-profile.json";
}

Result<Cluster> cpu_cluster() {
  std::string path = cpu_profile_path();
  std::ifstream in(path);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    auto c = cluster_from_json(ss.str(), path);
    HEDDLE_TRY(c);
    Cluster out = *c;
    out.name = "cpu";
    out.source = "calibrated profile " + path;
    return out;
  }
  // Fallback: one device per hardware thread with modest x86 figures (fp32), until `heddle
  // calibrate` measures this one.
  Cluster c;
  c.name = "cpu";
  c.device.name = "cpu";
  c.device.peak_flops = 50e9;
  c.device.vector_flops = 0.5e9;
  c.device.memory_bytes = 8e9;
  c.device.memory_bandwidth = 10e9;
  c.device.launch_s = 2e-6;
  c.device.gemm_efficiency = 0.9;
  c.device.gemm_knee = 32;
  c.device.memory_efficiency = 1.0;
  c.device.element_bytes = 4;
  c.device.fuses_elementwise = false;
  c.device.batched_gemm = false;
  c.count = std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  c.devices_per_node = c.count;
  c.intra_node = {"shared-memory", 5e9, 5e-6};
  c.inter_node = c.intra_node;
  c.source = "built-in fallback (no profile at " + path + "; run `heddle calibrate`)";
  return c;
}

Result<Cluster> resolve_cluster(std::string_view spec) {
  if (spec == "cpu") return cpu_cluster();
  std::string s(spec);
  if (s.size() > 5 && s.substr(s.size() - 5) == ".json") {
    auto text = read_file_bounded(
        s, {.max_bytes = limits::kMaxJsonBytes, .what = "cluster file", .raise_with = ""});
    HEDDLE_TRY(text);
    auto c = cluster_from_json(*text, s);
    HEDDLE_TRY(c);
    if (c->count > limits::kMaxClusterDevices)
      return Diagnostic(SourceLoc{s, 0, 0},
                        fmt::format("'count' {} is more than the {} devices heddle plans and "
                                    "simulates",
                                    c->count, limits::kMaxClusterDevices));
    return c;
  }
  return cluster_preset(spec);
}

}  // namespace heddle::cost
