// The techniques one priced step uses (precision, attention kernel, overlap, offload): the
// strategy's keys with the device's defaults filled in and checked against the cluster, and the
// device profile the step's kernels are priced on.
#pragma once

#include "heddle/cost/Cluster.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle::cost {

/// Every technique of one step, resolved.
struct Techniques {
  Precision precision = Precision::kBf16;
  Attention attention = Attention::kEager;
  Overlap overlap = Overlap::kNone;
  Offload offload = Offload::kNone;
  bool operator==(const Techniques&) const = default;
};

/// The strategy's techniques with defaults: bf16 on devices priced in a 2-byte type (fp32 on a
/// 4-byte one, the CPU); flash attention where the device has a fused attention kernel, else
/// eager; the device's default overlap (`overlap_flag`, the CLI's --overlap: dp+tp); no offload.
/// Diagnostics: fp8 on a device without fp8 tensor cores, bf16/fp8 on a device that computes in
/// fp32 only, flash attention on a device without a fused kernel, offload on a cluster without
/// host memory, NVMe offload on a cluster without NVMe or with a ZeRO stage other than 3.
Result<Techniques> resolve_techniques(const StrategySpec& spec, const Cluster& cluster,
                                      bool overlap_flag);

/// `device` as one step with `t` prices it: fp32 GEMMs at the TF32 peak (else the vector peak)
/// with 4-byte values; fp8 linear-layer GEMMs at the fp8 peak with 1-byte saved inputs
/// (Transformer Engine keeps the fp8 cast of a linear layer's input for backward); flash
/// attention as fused kernels (DeviceProfile::fused_attention). Precondition: `t` resolved for
/// `device` (resolve_techniques()).
DeviceProfile priced_device(const DeviceProfile& device, const Techniques& t);

/// The cluster's device kinds (Cluster::kinds; a one-kind cluster: itself), each with its device
/// as priced_device() prices it under `t`.
std::vector<Cluster> priced_kinds(const Cluster& cluster, const Techniques& t);

/// Extra bytes of model state per parameter on the device under `t`: 1 with fp8 (Transformer
/// Engine's fp8 weight copy, cast once per step and kept across micro-batches), else 0.
double technique_state_bytes_per_param(const Techniques& t);

/// Bytes per gradient element kept and reduced over dp under `t`: kGradientBytes (fp32) with
/// bf16 and fp32, as Megatron-LM's bf16 default and torchtitan's reduce dtype; 2 (bf16) with
/// fp8, as NVIDIA's fp8 recipes set (NeMo-Framework-Launcher's H100 fp8 examples pass
/// `optim.grad_sync_dtype=bf16`, its gradient buffer and reduce-scatter in bf16).
double gradient_bytes(const Techniques& t);

}  // namespace heddle::cost
