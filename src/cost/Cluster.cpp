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

int64_t Cluster::kind_of(int64_t first, int64_t n) const {
  HEDDLE_ASSERT(first >= 0 && n >= 1) << "devices [" << first << ", +" << n << ")";
  if (kinds.empty()) return first + n <= count ? 0 : -1;
  int64_t start = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    const int64_t end = start + kinds[k].count;
    if (first >= start && first < end) return first + n <= end ? static_cast<int64_t>(k) : -1;
    start = end;
  }
  return -1;
}

const Cluster& Cluster::kind(int64_t k) const {
  if (kinds.empty()) {
    HEDDLE_ASSERT(k == 0) << "kind " << k << " of a one-kind cluster";
    return *this;
  }
  HEDDLE_ASSERT(k >= 0 && k < static_cast<int64_t>(kinds.size())) << "kind " << k;
  return kinds[static_cast<size_t>(k)];
}

const LinkClass& Cluster::kind_link(int64_t a, int64_t b) const {
  if (a == b) return kind(a).inter_node;
  const std::string &na = kind(a).name, &nb = kind(b).name;
  for (const auto& l : kind_links)
    if ((l.a == na && l.b == nb) || (l.a == nb && l.b == na)) return l.link;
  HEDDLE_UNREACHABLE() << "no link between kinds " << na << " and " << nb;
}

double Cluster::mean_peak_flops() const {
  if (kinds.empty()) return device.peak_flops;
  double sum = 0;
  for (const auto& k : kinds) sum += k.device.peak_flops * static_cast<double>(k.count);
  return sum / static_cast<double>(count);
}

void Cluster::for_each_device(const std::function<void(DeviceProfile&)>& f) {
  f(device);
  for (auto& k : kinds) k.for_each_device(f);
}

Result<std::vector<int64_t>> stage_kinds(const Cluster& cluster,
                                         const std::vector<int64_t>& stage_devices) {
  std::vector<int64_t> out;
  int64_t first = 0;
  for (int64_t n : stage_devices) {
    const int64_t k = cluster.kind_of(first, n);
    if (k < 0) {
      std::string sizes;
      for (const auto& kd : cluster.kinds)
        sizes += fmt::format("{}{} {}", sizes.empty() ? "" : ", ", kd.name, kd.count);
      return Diagnostic(fmt::format(
          "pipeline stage {} (devices {} to {}) spans two device kinds of mixed cluster {} ({}); "
          "every stage runs on one kind: choose pp and per-stage sub-meshes (meshes=) whose "
          "stages end where a kind does",
          out.size(), first, first + n - 1, cluster.name, sizes));
    }
    out.push_back(k);
    first += n;
  }
  return out;
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
  hash_combine(h, nvme_bytes);
  hash_combine(h, nvme_read_bandwidth);
  hash_combine(h, nvme_write_bandwidth);
  for (const auto& k : kinds) hash_combine(h, k.hash());
  for (const auto& l : kind_links) {
    hash_combine(h, std::hash<std::string>()(l.a + "|" + l.b));
    hash_combine(h, l.link.hash());
  }
  return h;
}

std::string Cluster::to_string() const {
  if (mixed()) {
    std::string out =
        fmt::format("cluster {}: {} devices of {} kinds\n", name, count, kinds.size());
    for (const auto& k : kinds) out += k.to_string();
    for (const auto& l : kind_links)
      out += fmt::format("  link {} <-> {}: {}\n", l.a, l.b, l.link.to_string());
    return out + fmt::format("  source: {}\n", source);
  }
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
// NVMe per device: the node's data drives over its 8 GPUs (DGX A100 datasheet: 15 TB, 4 x 3.84 TB
// U.2 NVMe; DGX H100 datasheet: 30 TB, 8 x 3.84 TB), each drive read at 7.0 and written at 3.8
// GB/s (a PCIe Gen4 3.84 TB U.2 data-centre drive's datasheet sequential rates, e.g. Samsung
// PM1733; an assumption: the DGX drive model varies); p3.16xlarge has none (EBS only).
struct Links {
  LinkClass intra, inter;
  double host_bytes = 0, host_bandwidth = 0, host_dram = 0;
  double nvme_bytes = 0, nvme_read = 0, nvme_write = 0;
};

Links preset_links(const std::string& device) {
  if (device == "v100")
    return {{"nvlink2", 300e9 * 230 / 600, 1e-5},
            {"ethernet-25g", 25e9 / 8 / 8, 3e-5},
            488.0 * (1 << 30) / 8,
            0.8 * 16e9,
            154e9 / 8};
  if (device.rfind("a100", 0) == 0)
    return {{"nvlink3", 230e9, 1e-5},
            {"ib-hdr", 25e9, 1e-5},
            2e12 / 8,
            0.8 * 32e9,
            410e9 / 8,
            15.36e12 / 8,
            4 * 7.0e9 / 8,
            4 * 3.8e9 / 8};
  return {{"nvlink4", 370e9, 1e-5},
          {"ib-ndr", 50e9, 1e-5},
          2e12 / 8,
          0.8 * 64e9,
          614e9 / 8,
          30.72e12 / 8,
          8 * 7.0e9 / 8,
          8 * 3.8e9 / 8};
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
                                 const std::string& prefix, const std::string& key) {
  const std::string path = prefix.empty() ? key : prefix + "." + key;
  if (!j.contains(key)) return field_error(file, path, "is missing");
  const auto& o = j.at(key);
  if (!o.is_object())
    return field_error(file, path, "must be an object with bandwidth and latency");
  HEDDLE_TRY(check_keys(keys_of(o), {"name", "bandwidth", "latency"}, file, "'" + path + "'"));
  LinkClass l;
  l.name = o.contains("name") && o.at("name").is_string() ? o.at("name").get<std::string>() : key;
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
  c.nvme_bytes = l.nvme_bytes;
  c.nvme_read_bandwidth = l.nvme_read;
  c.nvme_write_bandwidth = l.nvme_write;
  c.source = "preset (published figures, docs/cost-model.md)";
  return c;
}

namespace {

// The device of a cluster or kind object `j` (`path`: its name in diagnostics, empty at the top).
Result<DeviceProfile> device_from_json(const nlohmann::json& j, const std::string& file,
                                       const std::string& path) {
  const std::string where = path.empty() ? "device" : path + ".device";
  if (!j.contains("device")) return field_error(file, where, "is missing");
  const auto& d = j.at("device");
  if (d.is_string()) {
    auto dev = find_device(d.get<std::string>());
    if (!dev.ok())
      return Diagnostic(SourceLoc{file, 0, 0},
                        "cluster field '" + where + "': " + dev.error().message);
    return *dev;
  }
  if (!d.is_object()) return field_error(file, where, "must be a preset name or an object");
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
                         "fp8_gemm_efficiency",
                         "runtime_bytes",
                         "fragmentation"},
                        file, "'" + where + "'"));
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
       {F{"peak_flops", &p.peak_flops, true, true}, F{"memory_bytes", &p.memory_bytes, true, true},
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
        F{"fp8_gemm_efficiency", &p.fp8_gemm_efficiency, false, true},
        F{"runtime_bytes", &p.runtime_bytes, false, false},
        F{"fragmentation", &p.fragmentation, false, false}}) {
    auto v = number(d, file, where, f.key, f.required, *f.dst, f.positive);
    HEDDLE_TRY(v);
    *f.dst = *v;
  }
  if (d.contains("kernel_element_s")) {
    const auto& k = d.at("kernel_element_s");
    if (!k.is_object())
      return field_error(file, where + ".kernel_element_s",
                         "must be an object of seconds per point by op kind");
    for (const auto& [kind, v] : k.items()) {
      if (!parse_op_kind(kind.substr(0, kind.find(':'))))
        return field_error(file, where + ".kernel_element_s." + kind, "is not an op kind");
      auto rate = number(k, file, where + ".kernel_element_s", kind.c_str(), true, 0);
      HEDDLE_TRY(rate);
      p.kernel_element_s[kind] = *rate;
    }
  }
  for (auto [key, dst] : {std::pair<const char*, bool*>{"fuses_elementwise", &p.fuses_elementwise},
                          {"batched_gemm", &p.batched_gemm}}) {
    if (!d.contains(key)) continue;
    if (!d.at(key).is_boolean())
      return field_error(file, where + "." + key, "must be true or false");
    *dst = d.at(key).get<bool>();
  }
  return p;
}

// One group of devices of one kind: a whole one-kind file (`path` empty) or one of a mixed
// file's `kinds` (`path` = `kinds[i]`; a preset device's links, host and NVMe figures are its
// defaults, and `memory_bytes` may override the device's).
Result<Cluster> devices_from_json(const nlohmann::json& j, const std::string& file,
                                  const std::string& path) {
  const bool kind = !path.empty();
  std::vector<std::string> valid = {"name",
                                    "device",
                                    "count",
                                    "devices_per_node",
                                    "intra_node",
                                    "inter_node",
                                    "host_memory_bytes",
                                    "host_bandwidth",
                                    "host_memory_bandwidth",
                                    "nvme_bytes",
                                    "nvme_read_bandwidth",
                                    "nvme_write_bandwidth"};
  if (kind) valid.push_back("memory_bytes");
  HEDDLE_TRY(check_keys(keys_of(j), valid, file, kind ? path : ""));
  auto dev = device_from_json(j, file, path);
  HEDDLE_TRY(dev);
  auto count = number(j, file, path, "count", true, 0);
  HEDDLE_TRY(count);
  // Range-check before converting: a double beyond int64 does not convert (undefined behaviour).
  constexpr double kMaxCount = 1 << 30;
  if (*count != std::floor(*count) || *count > kMaxCount)
    return field_error(file, kind ? path + ".count" : "count",
                       fmt::format("must be an integer from 1 to 2^30, got {}", *count));
  Cluster c;
  const bool preset = kind && j.at("device").is_string();
  if (preset) {  // the preset's links, host and NVMe figures as defaults
    auto base = cluster_preset(fmt::format("{}x{}", dev->name, static_cast<int64_t>(*count)));
    if (base.ok()) c = *base;
  }
  c.name = j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>()
           : kind                                         ? dev->name
                                                          : file;
  c.device = *dev;
  c.count = static_cast<int64_t>(*count);
  if (kind) {
    auto mem = number(j, file, path, "memory_bytes", false, c.device.memory_bytes);
    HEDDLE_TRY(mem);
    c.device.memory_bytes = *mem;
  }
  auto per_node = number(j, file, path, "devices_per_node", false, 8);
  HEDDLE_TRY(per_node);
  if (*per_node != std::floor(*per_node) || *per_node > kMaxCount)
    return field_error(file, kind ? path + ".devices_per_node" : "devices_per_node",
                       fmt::format("must be an integer from 1 to 2^30, got {}", *per_node));
  c.devices_per_node = static_cast<int64_t>(*per_node);
  for (auto [key, dst] :
       {std::pair<const char*, double*>{"host_memory_bytes", &c.host_memory_bytes},
        {"host_bandwidth", &c.host_bandwidth},
        {"host_memory_bandwidth", &c.host_memory_bandwidth},
        {"nvme_bytes", &c.nvme_bytes},
        {"nvme_read_bandwidth", &c.nvme_read_bandwidth},
        {"nvme_write_bandwidth", &c.nvme_write_bandwidth}}) {
    auto v = number(j, file, path, key, false, *dst, false);
    HEDDLE_TRY(v);
    *dst = *v;
  }
  if (!preset || j.contains("intra_node")) {
    auto intra = link_from_json(j, file, path, "intra_node");
    HEDDLE_TRY(intra);
    c.intra_node = *intra;
    if (!preset) c.inter_node = c.intra_node;
  }
  if (j.contains("inter_node")) {
    auto inter = link_from_json(j, file, path, "inter_node");
    HEDDLE_TRY(inter);
    c.inter_node = *inter;
  }
  c.source = "file " + file;
  return c;
}

// A mixed cluster: `kinds` and the `links` between every pair of them.
Result<Cluster> mixed_from_json(const nlohmann::json& j, const std::string& file) {
  HEDDLE_TRY(check_keys(keys_of(j), {"name", "kinds", "links"}, file, ""));
  const auto& ks = j.at("kinds");
  if (!ks.is_array() || ks.empty())
    return field_error(file, "kinds", "must be a non-empty list of device kinds");
  std::vector<Cluster> kinds;
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string path = fmt::format("kinds[{}]", i);
    if (!ks[i].is_object()) return field_error(file, path, "must be an object");
    auto k = devices_from_json(ks[i], file, path);
    HEDDLE_TRY(k);
    for (const auto& other : kinds)
      if (other.name == k->name)
        return field_error(file, path + ".name",
                           "repeats kind '" + k->name + "'; give each kind its own name");
    kinds.push_back(std::move(*k));
  }
  Cluster c = kinds.front();
  c.name = j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>() : file;
  c.source = "file " + file;
  if (kinds.size() == 1) return c;
  std::vector<KindLink> links;
  if (j.contains("links")) {
    const auto& ls = j.at("links");
    if (!ls.is_array()) return field_error(file, "links", "must be a list of links");
    for (size_t i = 0; i < ls.size(); ++i) {
      const std::string path = fmt::format("links[{}]", i);
      const auto& l = ls[i];
      if (!l.is_object()) return field_error(file, path, "must be an object");
      HEDDLE_TRY(check_keys(keys_of(l), {"between", "name", "bandwidth", "latency"}, file, path));
      if (!l.contains("between") || !l.at("between").is_array() || l.at("between").size() != 2 ||
          !l.at("between")[0].is_string() || !l.at("between")[1].is_string())
        return field_error(file, path + ".between", "must name two kinds, [\"a\", \"b\"]");
      KindLink kl{l.at("between")[0].get<std::string>(), l.at("between")[1].get<std::string>(), {}};
      for (const auto& n : {kl.a, kl.b})
        if (std::none_of(kinds.begin(), kinds.end(), [&](const Cluster& k) { return k.name == n; }))
          return field_error(file, path + ".between", "names no kind '" + n + "'");
      auto bw = number(l, file, path, "bandwidth", true, 0);
      HEDDLE_TRY(bw);
      auto lat = number(l, file, path, "latency", false, 1e-5, false);
      HEDDLE_TRY(lat);
      kl.link = {l.contains("name") && l.at("name").is_string() ? l.at("name").get<std::string>()
                                                                : kl.a + "-" + kl.b,
                 *bw, *lat};
      links.push_back(std::move(kl));
    }
  }
  c.count = 0;
  for (size_t a = 0; a < kinds.size(); ++a) {
    c.count += kinds[a].count;
    c.host_memory_bytes = std::min(c.host_memory_bytes, kinds[a].host_memory_bytes);
    c.host_bandwidth = std::min(c.host_bandwidth, kinds[a].host_bandwidth);
    c.nvme_bytes = std::min(c.nvme_bytes, kinds[a].nvme_bytes);
    for (size_t b = a + 1; b < kinds.size(); ++b)
      if (std::none_of(links.begin(), links.end(), [&](const KindLink& l) {
            return (l.a == kinds[a].name && l.b == kinds[b].name) ||
                   (l.a == kinds[b].name && l.b == kinds[a].name);
          }))
        return field_error(file, "links",
                           "has no link between kinds '" + kinds[a].name + "' and '" +
                               kinds[b].name + "'; add {\"between\": [\"" + kinds[a].name +
                               "\", \"" + kinds[b].name + "\"], \"bandwidth\": ...}");
  }
  c.kinds = std::move(kinds);
  c.kind_links = std::move(links);
  return c;
}

}  // namespace

Result<Cluster> cluster_from_json(std::string_view text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers beyond double
    return Diagnostic(SourceLoc{file, 0, 0}, std::string("malformed cluster JSON: ") + e.what());
  }
  if (!j.is_object()) return Diagnostic(SourceLoc{file, 0, 0}, "a cluster file is a JSON object");
  if (j.contains("kinds")) return mixed_from_json(j, file);
  return devices_from_json(j, file, "");
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
