// Closed-form memory figures: model states under mixed-precision Adam and ZeRO (arXiv 1910.02054)
// and transformer-layer activations (Korthikanti et al., arXiv 2205.05198). The simulator derives
// activations from the graph; these formulas are the published references it is checked against.
#pragma once

#include <cstdint>
#include <string_view>

#include "heddle/cost/DeviceProfile.h"
#include "heddle/sharding/Recompute.h"
#include "heddle/support/Result.h"

namespace heddle::cost {

/// Bytes per gradient element the stacks keep and reduce in bf16/fp8 training: fp32. Megatron-LM
/// sets `accumulate_allreduce_grads_in_fp32` for bf16 (its grad buffer, `main_grad`, is fp32;
/// the distributed optimizer's README table: "bf16 param, fp32 grads", 18 and 6 + 12/d bytes per
/// parameter), and torchtitan's FSDP2 reduces in `mixed_precision_reduce = "float32"`.
inline constexpr double kGradientBytes = 4;

/// Bytes per device of weights, gradients and Adam state for `params` parameters with weights of
/// `weight_bytes` and gradients of `grad_bytes` each, under ZeRO stage `zero` over `dp`
/// data-parallel devices. The optimizer state is 12 bytes (fp32 master weights and two moments)
/// with 16-bit weights, 8 (two moments) with fp32 weights (they are the master copy):
/// stage 0 `(w + g + o) P`, 1 `(w + g) P + o P/N`, 2 `w P + (g + o) P/N`, 3 `16 P/N` (the ZeRO
/// paper's fp16 weights and gradients with a 12-byte optimizer, or FSDP2's fp32 sharded weights
/// and gradients with Adam's moments: 16 either way). Defaults (2 and 2) are the ZeRO paper's
/// `16P`, `4P + 12P/N`, `2P + 14P/N` (arXiv 1910.02054); the simulator passes kGradientBytes.
/// Precondition: 0 <= zero <= 3, dp >= 1.
double model_state_bytes(double params, int64_t zero, int64_t dp, double grad_bytes = 2,
                         double weight_bytes = 2);

/// Korthikanti's activation bytes of one transformer layer for a micro-batch of `b` sequences of
/// length `s`, hidden `h`, `a` heads, tensor-parallel `t`, with or without sequence parallelism:
/// `sbh (34 + 5as/h)` (t = 1), `sbh (10 + 24/t + 5as/(ht))`, with sp `sbh (34/t + 5as/(ht))`;
/// full recomputation keeps `2sbh` (divided by t with sp); selective drops the `5as/h` term.
/// Precondition: all sizes >= 1.
double layer_activation_bytes(double s, double b, double h, double a, int64_t t, bool sp,
                              Recompute r);

/// Megatron-LM's gradient bucket in parameters, its default `bucket_size` (Megatron-Core's
/// DistributedDataParallel: `max(40M, 1M x dp)`, dp counting context-parallel ranks).
/// Precondition: dp >= 1.
double gradient_bucket_params(int64_t dp);

/// Gradient and parameter buffers a device holds during a training step beyond the model states
/// of model_state_bytes(), for `params` parameter elements of which one layer unit (or the
/// stage's embedding or head, if larger) is `unit_params`, weights of `element_bytes` and
/// gradients reduced in `grad_bytes`:
/// - ZeRO 0 and 1: none (the gradients live in one contiguous buffer the buckets are views of,
///   Megatron's grad buffer, torch DDP's `gradient_as_bucket_view`);
/// - ZeRO 2: the full gradients of two buckets (gradient_bucket_params()): the one backward is
///   filling and the one being reduce-scattered, at `grad_bytes`;
/// - ZeRO 3 (FSDP): the all-gathered parameters of two units (the one computing and the one
///   prefetched) and one unit's unsharded gradient before its reduce-scatter, in the compute
///   precision and its copy at `grad_bytes` (FSDP2 casts to its reduce dtype), when
///   `grad_bytes` differs from `element_bytes`.
/// Precondition: 0 <= zero <= 3, dp >= 1.
double gradient_buffer_bytes(int64_t zero, int64_t dp, double params, double unit_params,
                             double element_bytes, double grad_bytes);

/// The allocator allowance of one device: `dev.runtime_bytes` (CUDA context, kernels, NCCL and
/// cuBLAS buffers) plus `dev.fragmentation` of `dynamic_bytes`, what the caching allocator hands
/// out and takes back during the step (activations, transient and gradient buffers; the model
/// states are allocated once, in contiguous buffers).
double allocator_allowance_bytes(const DeviceProfile& dev, double dynamic_bytes);

}  // namespace heddle::cost
