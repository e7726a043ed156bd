#include "heddle/cost/Techniques.h"

#include <fmt/format.h>

#include "heddle/cost/MemoryModel.h"

namespace heddle::cost {

namespace {

Result<Techniques> resolve_one(const StrategySpec& spec, const Cluster& cluster,
                               bool overlap_flag) {
  const DeviceProfile& dev = cluster.device;
  const bool fp32_device = dev.element_bytes >= 4;
  Techniques t;
  t.precision = spec.precision.value_or(fp32_device ? Precision::kFp32 : Precision::kBf16);
  if (t.precision == Precision::kFp8 && dev.fp8_flops <= 0)
    return Diagnostic(fmt::format(
        "precision=fp8 needs fp8 tensor cores, and {} has none (fp8 GEMMs came with Hopper: "
        "h100, h200); use precision=bf16",
        dev.name));
  if (fp32_device && t.precision != Precision::kFp32)
    return Diagnostic(fmt::format(
        "precision={} is not available on {}: its kernels compute in fp32; use precision=fp32",
        to_string(t.precision), dev.name));
  t.attention =
      spec.attention.value_or(dev.attention_efficiency > 0 ? Attention::kFlash : Attention::kEager);
  if (t.attention == Attention::kFlash && dev.attention_efficiency <= 0)
    return Diagnostic(fmt::format(
        "attention=flash needs a fused attention kernel, and {} has none in its profile "
        "(FlashAttention needs Ampere or newer; a cluster file may set the device's "
        "attention_efficiency); use attention=eager",
        dev.name));
  t.overlap = spec.overlap.value_or(overlap_flag ? Overlap::kDpTp : dev.default_overlap);
  t.offload = spec.offload.value_or(Offload::kNone);
  if (t.offload != Offload::kNone &&
      (cluster.host_memory_bytes <= 0 || cluster.host_bandwidth <= 0))
    return Diagnostic(fmt::format(
        "offload={} moves state to host memory, and cluster {} gives none; describe it in a "
        "cluster file (host_memory_bytes and host_bandwidth per device) or use offload=none",
        to_string(t.offload), cluster.name));
  if (t.offload == Offload::kOptimizerParamsNvme) {
    if (cluster.nvme_bytes <= 0 || cluster.nvme_read_bandwidth <= 0 ||
        cluster.nvme_write_bandwidth <= 0)
      return Diagnostic(fmt::format(
          "offload=optimizer+params:nvme keeps the optimizer state and weights on NVMe, and "
          "cluster {} gives none; describe it in a cluster file (nvme_bytes, nvme_read_bandwidth "
          "and nvme_write_bandwidth per device) or offload to host memory "
          "(offload=optimizer+params)",
          cluster.name));
    if (spec.zero && *spec.zero != 3)
      return Diagnostic(fmt::format(
          "offload=optimizer+params:nvme is ZeRO-Infinity, which partitions the states with "
          "ZeRO-3 (DeepSpeed offloads parameters with stage 3 only); use zero=3, not zero={}",
          *spec.zero));
  }
  return t;
}

}  // namespace

Result<Techniques> resolve_techniques(const StrategySpec& spec, const Cluster& cluster,
                                      bool overlap_flag) {
  if (!cluster.mixed()) return resolve_one(spec, cluster, overlap_flag);
  // One job runs one set of techniques on every kind: an unset key takes what every kind's
  // default allows (eager attention if a kind has no fused kernel, the least overlap), then
  // each kind checks the result (fp8 on a kind without it is refused, naming the kind).
  StrategySpec pinned = spec;
  auto of_kind = [&](const Cluster& k, const Diagnostic& d) {
    return Diagnostic(fmt::format("kind '{}' of cluster {}: {}", k.name, cluster.name, d.message));
  };
  for (const auto& k : cluster.kinds) {
    auto t = resolve_one(spec, k, overlap_flag);
    if (!t.ok()) return of_kind(k, t.error());
    if (!spec.precision) pinned.precision = t->precision;  // bf16 on every GPU kind
    if (!spec.attention && (!pinned.attention || t->attention == Attention::kEager))
      pinned.attention = t->attention;
    if (!spec.overlap && (!pinned.overlap || t->overlap < *pinned.overlap))
      pinned.overlap = t->overlap;
  }
  std::optional<Techniques> out;
  for (const auto& k : cluster.kinds) {
    auto t = resolve_one(pinned, k, overlap_flag);
    if (!t.ok()) return of_kind(k, t.error());
    out = *t;
  }
  return *out;
}

DeviceProfile priced_device(const DeviceProfile& device, const Techniques& t) {
  DeviceProfile d = device;
  if (t.precision == Precision::kFp32 && d.element_bytes < 4) {
    d.peak_flops = d.tf32_flops > 0 ? d.tf32_flops : d.vector_flops;
    d.element_bytes = 4;
  }
  if (t.precision == Precision::kFp8) {
    // The shape curve scales gemm_efficiency; a large fp8 GEMM reaches fp8_gemm_efficiency.
    d.param_gemm_flops = d.fp8_flops * d.fp8_gemm_efficiency / d.gemm_efficiency;
    d.param_gemm_input_bytes = 1;
  }
  d.fused_attention = t.attention == Attention::kFlash;
  return d;
}

std::vector<Cluster> priced_kinds(const Cluster& cluster, const Techniques& t) {
  std::vector<Cluster> out = cluster.mixed() ? cluster.kinds : std::vector<Cluster>{cluster};
  for (auto& k : out) k.device = priced_device(k.device, t);
  return out;
}

double technique_state_bytes_per_param(const Techniques& t) {
  return t.precision == Precision::kFp8 ? 1 : 0;
}

double gradient_bytes(const Techniques& t) {
  return t.precision == Precision::kFp8 ? 2 : kGradientBytes;
}

}  // namespace heddle::cost
