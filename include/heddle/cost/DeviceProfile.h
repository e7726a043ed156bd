// DeviceProfile: what the cost model knows about one accelerator (peak compute, memory, memory
// bandwidth, launch overhead, GEMM efficiency curve), with published presets for V100, A100 40/80
// GB, H100 and H200 (sources in docs/cost-model.md).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/sharding/StepTechniques.h"
#include "heddle/support/Result.h"

namespace heddle::cost {

/// An immutable description of one device. Efficiencies are fractions of the peak.
struct DeviceProfile {
  std::string name;             ///< `a100-80gb`, `h100`, `cpu`, ...
  double peak_flops = 0;        ///< dense FLOP/s in the training dtype (bf16/fp16; fp32 on cpu)
  double memory_bytes = 0;      ///< device memory capacity
  double memory_bandwidth = 0;  ///< bytes/s
  double vector_flops = 0;      ///< FLOP/s of non-GEMM work (fp32 SIMT units); 0: peak_flops
  double elementwise_bandwidth = 0;  ///< bytes/s non-GEMM kernels stream; 0: bandwidth x efficiency
  double launch_s = 5e-6;            ///< fixed cost of one kernel launch; default 5 us
  double gemm_efficiency = 0.75;     ///< fraction of peak a large GEMM reaches; default 0.75
  double gemm_knee = 128;            ///< a GEMM dim of this size halves its factor; default 128
  double memory_efficiency = 0.8;    ///< fraction of bandwidth streaming ops reach; default 0.8
  bool fuses_elementwise = true;  ///< elementwise chains share one pass over memory; default true
  /// Batch dims of a contraction run inside one GEMM call (batched GEMM; default true). false:
  /// one GEMM call per batch point (heddle's CPU kernel), so the shape efficiency is that of one
  /// call's M x N x K.
  bool batched_gemm = true;
  double element_bytes = 2;  ///< bytes per activation/weight element; default 2 (bf16)
  /// Seconds per element (index points times the largest input window, kernel_elements()) of
  /// the device's kernel for an op kind (by kind name, e.g. `softmax`), output allocation
  /// included, as `heddle calibrate` measures heddle's own kernels. A listed kind costs
  /// `launch_s + elements x rate` instead of the roofline. Default empty (every op on the
  /// roofline; the GPU presets).
  std::map<std::string, double> kernel_element_s;
  double tdp_watts = 0;   ///< power while busy (the board's maximum, TDP); default 0: unknown
  double idle_watts = 0;  ///< power while idle; default 0: unknown
  /// Dense fp8 tensor-core FLOP/s; default 0: the device has no fp8 GEMMs (precision=fp8 is
  /// refused).
  double fp8_flops = 0;
  /// Fraction of fp8_flops a large fp8 linear-layer GEMM reaches, Transformer Engine's casts and
  /// scaling included (the shape curve as for bf16); default 0.53.
  double fp8_gemm_efficiency = 0.53;
  /// Dense TF32 tensor-core FLOP/s, what precision=fp32 GEMMs run at; default 0: none (fp32 GEMMs
  /// at vector_flops).
  double tf32_flops = 0;
  /// Fraction of peak a fused (flash) attention kernel reaches at long sequences and wide heads,
  /// see attention_fraction(); default 0: no fused attention kernel (attention=flash refused).
  double attention_efficiency = 0;
  /// What the training stacks on this device overlap by default (Megatron-LM, torchtitan);
  /// default none.
  Overlap default_overlap = Overlap::kNone;
  /// Memory a training process holds outside its tensors: CUDA context and loaded kernels,
  /// NCCL communicator buffers, cuBLAS workspaces (allocator_allowance_bytes()); default 0 (the
  /// `cpu` device: heddle's executor has none). GPU presets: 2 GB (docs/cost-model.md, Memory).
  double runtime_bytes = 0;
  /// Fraction of the memory the caching allocator hands out and takes back during a step
  /// (activations, gradient buckets, gathered parameters) that fragmentation keeps unusable
  /// (allocator_allowance_bytes()); default 0. GPU presets: 0.05 (docs/cost-model.md, Memory).
  double fragmentation = 0;

  /// Set by priced_device() for one step's techniques, not by presets:
  /// FLOP/s of contractions that read a parameter (the linear layers); 0: peak_flops.
  double param_gemm_flops = 0;
  /// Bytes per element a linear layer keeps of its input for backward; 0: element_bytes.
  double param_gemm_input_bytes = 0;
  /// Attention runs as one fused kernel (attention_fraction()); its s x s values are neither
  /// written nor kept, the scores are recomputed in backward.
  bool fused_attention = false;

  /// Fraction of peak for a GEMM of m x n x k (batch dims folded into m):
  /// `gemm_efficiency * f(m) f(n) f(k)` with `f(x) = x / (x + gemm_knee)`. Precondition: >= 1.
  double gemm_fraction(double m, double n, double k) const;
  /// Fraction of peak of a fused attention kernel over `s` keys with head dim `d`:
  /// `attention_efficiency * s / (s + 256) * d / (d + 32)` (256: short sequences leave the
  /// kernel's 128-row tiles and its softmax rescaling poorly amortized; 32: narrow heads make
  /// thin GEMMs). Precondition: s, d >= 1.
  double attention_fraction(double s, double d) const;

  bool operator==(const DeviceProfile&) const = default;
  size_t hash() const;
  /// `a100-80gb: 312 TFLOP/s, 80 GB, 2.04 TB/s`.
  std::string to_string() const;
};

/// The published device presets, in a stable order (v100, a100-40gb, a100-80gb, a100, h100,
/// h200; `a100` is the 80 GB part).
const std::vector<DeviceProfile>& device_presets();

/// The preset called `name` (case-insensitive); a Diagnostic listing the known names otherwise.
Result<DeviceProfile> find_device(std::string_view name);

}  // namespace heddle::cost

template <>
struct std::hash<heddle::cost::DeviceProfile> {
  size_t operator()(const heddle::cost::DeviceProfile& d) const { return d.hash(); }
};
