#include "heddle/cost/DeviceProfile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "heddle/support/Hash.h"

namespace heddle::cost {

double DeviceProfile::gemm_fraction(double m, double n, double k) const {
  HEDDLE_ASSERT(m >= 1 && n >= 1 && k >= 1) << m << " " << n << " " << k;
  auto f = [&](double x) { return x / (x + gemm_knee); };
  return gemm_efficiency * f(m) * f(n) * f(k);
}

double DeviceProfile::attention_fraction(double s, double d) const {
  HEDDLE_ASSERT(s >= 1 && d >= 1) << s << " " << d;
  return attention_efficiency * s / (s + 256) * d / (d + 32);
}

size_t DeviceProfile::hash() const {
  size_t h = std::hash<std::string>()(name);
  for (double v : {peak_flops, vector_flops, elementwise_bandwidth, memory_bytes, memory_bandwidth,
                   launch_s, gemm_efficiency, gemm_knee, memory_efficiency, element_bytes,
                   tdp_watts, idle_watts, fp8_flops, fp8_gemm_efficiency, tf32_flops,
                   attention_efficiency, param_gemm_flops, param_gemm_input_bytes})
    hash_combine(h, v);
  hash_combine(h, runtime_bytes);
  hash_combine(h, fragmentation);
  hash_combine(h, static_cast<int>(default_overlap));
  hash_combine(h, fused_attention);
  hash_combine(h, fuses_elementwise);
  hash_combine(h, batched_gemm);
  for (const auto& [kind, rate] : kernel_element_s) {
    hash_combine(h, kind);
    hash_combine(h, rate);
  }
  return h;
}

std::string DeviceProfile::to_string() const {
  return fmt::format("{}: {:g} TFLOP/s, {:g} GB, {:g} TB/s", name, peak_flops / 1e12,
                     memory_bytes / 1e9, memory_bandwidth / 1e12);
}

namespace {

DeviceProfile make(std::string name, double tflops, double gb, double tbps, double fp32, double tdp,
                   double idle, double tf32, double fp8, double attention, Overlap overlap) {
  DeviceProfile d;
  d.tf32_flops = tf32 * 1e12;
  d.fp8_flops = fp8 * 1e12;
  d.attention_efficiency = attention;
  d.default_overlap = overlap;
  d.tdp_watts = tdp;
  d.idle_watts = idle;
  d.vector_flops = fp32 * 1e12;
  d.name = std::move(name);
  d.peak_flops = tflops * 1e12;
  d.memory_bytes = gb * 1e9;
  d.memory_bandwidth = tbps * 1e12;
  // The allocator allowance of a PyTorch training process (docs/cost-model.md, Memory).
  d.runtime_bytes = 2e9;
  d.fragmentation = 0.05;
  return d;
}

}  // namespace

const std::vector<DeviceProfile>& device_presets() {
  // Vendor datasheets (docs/cost-model.md): dense fp16/bf16 tensor-core peak, HBM size and
  // bandwidth, fp32 (non-tensor) peak, maximum board power (TDP); idle power is an estimate
  // (datasheets do not give it). The GEMM efficiency curve is shared by every device (one global
  // fit). Then dense TF32 and fp8 tensor-core peaks (datasheets; 0: none), the fused-attention
  // efficiency (FlashAttention-2 on Ampere, arXiv 2307.08691; Transformer Engine's cuDNN fused
  // attention on Hopper, FlashAttention-3 class, arXiv 2407.08608; none on Volta) and what the
  // stacks overlap by default (gradient reduction everywhere; tensor-parallel collectives with
  // Transformer Engine's userbuffers on Hopper).
  static const std::vector<DeviceProfile> kPresets = {
      make("v100", 125, 32, 0.9, 15.7, 300, 40, 0, 0, 0, Overlap::kDp),
      make("a100-40gb", 312, 40, 1.555, 19.5, 400, 50, 156, 0, 0.8, Overlap::kDp),
      make("a100-80gb", 312, 80, 2.039, 19.5, 400, 50, 156, 0, 0.8, Overlap::kDp),
      make("a100", 312, 80, 2.039, 19.5, 400, 50, 156, 0, 0.8, Overlap::kDp),
      make("h100", 989, 80, 3.35, 67, 700, 70, 494.7, 1979, 0.8, Overlap::kDpTp),
      make("h200", 989, 141, 4.8, 67, 700, 70, 494.7, 1979, 0.8, Overlap::kDpTp),
  };
  return kPresets;
}

Result<DeviceProfile> find_device(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string known;
  for (const auto& d : device_presets()) {
    if (d.name == lower) return d;
    known += (known.empty() ? "" : ", ") + d.name;
  }
  return Diagnostic(fmt::format("unknown device '{}'; known devices: {}", name, known));
}

}  // namespace heddle::cost
