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

/// Bytes per device of weights, gradients and Adam state for `params` parameters (16 bytes each:
/// 2 + 2 + 12) under ZeRO stage `zero` over `dp` data-parallel devices: stage 0 `16P`, 1
/// `4P + 12P/N`, 2 `2P + 14P/N`, 3 `16P/N`. Precondition: 0 <= zero <= 3, dp >= 1.
double model_state_bytes(double params, int64_t zero, int64_t dp);

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
/// stage's embedding or head, if larger) is `unit_params`, at `element_bytes` each:
/// - ZeRO 0 and 1: none (the gradients live in one contiguous buffer the buckets are views of,
///   Megatron's grad buffer, torch DDP's `gradient_as_bucket_view`);
/// - ZeRO 2: the full gradients of two buckets (gradient_bucket_params()): the one backward is
///   filling and the one being reduce-scattered;
/// - ZeRO 3 (FSDP): the all-gathered parameters of two units (the one computing and the one
///   prefetched) and one unit's unsharded gradient before its reduce-scatter.
/// Precondition: 0 <= zero <= 3, dp >= 1.
double gradient_buffer_bytes(int64_t zero, int64_t dp, double params, double unit_params,
                             double element_bytes);

/// The allocator allowance of one device: `dev.runtime_bytes` (CUDA context, kernels, NCCL and
/// cuBLAS buffers) plus `dev.fragmentation` of `dynamic_bytes`, what the caching allocator hands
/// out and takes back during the step (activations, transient and gradient buffers; the model
/// states are allocated once, in contiguous buffers).
double allocator_allowance_bytes(const DeviceProfile& dev, double dynamic_bytes);

}  // namespace heddle::cost
