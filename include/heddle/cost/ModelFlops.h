// Model FLOPs: what MFU and TFLOP/s per device are computed from, independent of how a plan
// executes. Two counts, one convention each (docs/cost-model.md, "The simulator", step 7):
// - heddle's (`SimulationResult::model_flops`, `mfu`): the FLOPs the model needs, forward once and
//   backward twice, recomputation not counted, a causal model's attention over the half of the
//   score matrix a causal kernel computes (FlashAttention's count), so MFU never credits work the
//   step does not do;
// - the published one (`published_model_flops`, `published_mfu`): full `s^2` attention, as
//   Megatron-LM (Narayanan et al., SC'21, recomputation included), NeMo and torchtitan report it,
//   for comparison with their tables.
#pragma once

#include "heddle/ir/Graph.h"
#include "heddle/ops/zoo/Models.h"

namespace heddle::cost {

/// Megatron-LM's FLOPs of one step of a GPT model with global batch `batch` (the config's batch
/// is ignored; full `s^2` attention): training with full recomputation
/// `96 B s l h^2 (1 + s/(6h) + V/(16 l h))`, training without `72 B s l h^2 (1 + s/(6h) + V/(12 l
/// h))`, forward only `24 B s l h^2 (1 + s/(6h) + V/(12 l h))`. Precondition: batch >= 1.
double gpt_model_flops(const zoo::GptConfig& c, int64_t batch, bool train, bool full_recompute);

/// heddle's model FLOPs of one step of a (causal) GPT model with global batch `batch`: training
/// `72 B s l h^2 (1 + s/(12h) + V/(12 l h))` whatever the recomputation, forward only a third of
/// it: the attention scores and their product with the values over half the `s x s` matrix.
/// Precondition: batch >= 1.
double gpt_causal_model_flops(const zoo::GptConfig& c, int64_t batch, bool train);

/// The forward FLOPs of `g` a causal attention kernel skips: half of every contraction of two
/// activations whose result flows into a causal mask (the scores) and of the contraction the
/// masked scores flow into (the values), each through single-consumer elementwise, layout and
/// row ops (scale, softmax). 0 for a graph without a causal mask.
double causal_skipped_flops(const Graph& g);

}  // namespace heddle::cost
