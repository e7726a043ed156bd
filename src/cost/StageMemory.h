// The memory of one pipeline stage on its representative device (private to the simulator): the
// activations its chunks keep for backward at the schedule's peak, the working set of the block
// running, gradient buffers under ZeRO and the allocator allowance, on top of the model states
// (docs/cost-model.md, "Memory").
#pragma once

#include <cstdint>

#include "heddle/cost/ModelParts.h"
#include "heddle/cost/Simulator.h"
#include "heddle/cost/Techniques.h"

namespace heddle::cost {

/// Bytes the cross-entropy loss keeps per logit for backward: its fp32 softmax (Megatron's
/// vocab-parallel cross entropy; Korthikanti et al.'s `4sbv/t`).
inline constexpr double kLossBytesPerLogit = 4;

/// Activations one layer unit keeps for backward under recomputation `r`: what the graph keeps,
/// less the attention scores (selective), or only what flows into the next unit (full).
double layer_saved(const ModelParts& P, Recompute r);

/// What stage_memory() needs to know of a stage.
struct StageMemoryInput {
  const ModelParts* parts = nullptr;      ///< the stage's costed parts (required)
  const DeviceProfile* device = nullptr;  ///< its kind's device, techniques applied (required)
  bool train = false;                     ///< a training step (default: forward only)
  bool last = false;                      ///< the last stage: holds the head and the loss
  bool first = false;                     ///< the first stage: holds the embedding
  Recompute r = Recompute::kNone;
  Offload offload = Offload::kNone;
  int64_t zero = 0;                ///< ZeRO stage
  int64_t group = 1;               ///< devices ZeRO shards over (dp x cp)
  double kept = 0;                 ///< peak of the kept activations, walked over the schedule
  int64_t in_flight = 0;           ///< micro-batch chunks held at that peak
  double units = 0;                ///< layer units the stage holds, over all its chunks
  int64_t host_micro_batches = 1;  ///< micro-batches the host holds with offload=activations
  double params = 0;               ///< parameter elements on the device
  double grad_bytes = 2;           ///< bytes per gradient element (gradient_bytes(); default 2)
};

/// Fills `st`'s in_flight, activation_bytes, buffer_bytes, allocator_bytes and peak_memory_bytes
/// (states + buffers + activations + allowance), and adds the offloaded activations to
/// host_bytes (offload=activations). Precondition: st.state_bytes is set.
void stage_memory(const StageMemoryInput& in, StageResult& st);

}  // namespace heddle::cost
