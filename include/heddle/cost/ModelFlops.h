// Model FLOPs as Megatron-LM counts them (Narayanan et al., SC'21): what MFU and TFLOP/s per
// device are computed from, independent of how a plan executes.
#pragma once

#include "heddle/ops/zoo/Models.h"

namespace heddle::cost {

/// FLOPs of one step of a GPT model with global batch `batch` (the config's batch is ignored):
/// training with full recomputation `96 B s l h^2 (1 + s/(6h) + V/(16 l h))`, training without
/// `72 B s l h^2 (1 + s/(6h) + V/(12 l h))`, forward only `24 B s l h^2 (1 + s/(6h) + V/(12 l h))`.
/// Precondition: batch >= 1.
double gpt_model_flops(const zoo::GptConfig& c, int64_t batch, bool train, bool full_recompute);

}  // namespace heddle::cost
