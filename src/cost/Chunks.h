// Pipeline chunks as the simulator prices them (private to the simulator): one chunk's spans
// for one micro-batch, the layer units each chunk holds under a `layers=` split, and one
// micro-batch's blocks placed over the stages by the schedule.
#pragma once

#include <cstdint>
#include <vector>

#include "heddle/cost/Simulator.h"
#include "heddle/cost/StepBreakdown.h"
#include "heddle/pipeline/PipelineSchedule.h"
#include "heddle/pipeline/Schedule.h"
#include "heddle/support/Result.h"

namespace heddle::cost {

/// One pipeline chunk's spans for one micro-batch; `fwd_parts` and `bwd_parts` split `fwd` and
/// `bwd` into categories (their exposed totals equal the spans).
struct Timing {
  double fwd = 0, bwd = 0, wgrad = 0, saved = 0, comm_bytes = 0;
  StepBreakdown fwd_parts, bwd_parts;
};

/// The units per chunk of a `layers=` split: one entry per chunk, each a positive whole number of
/// the model's repeating units, summing to its layers.
Result<std::vector<int64_t>> layer_split(const std::vector<int64_t>& layers,
                                         const model::ScalableModel& model, int64_t chunks);

/// One micro-batch's blocks over the `pp` stages (chunk spans in seconds, memory in bytes):
/// schedule_placement()'s forward chain or training placement, with the chunks' timings, and
/// each block's span split into categories.
struct ChunkPlacement {
  pipeline::BlockPlacement pl;
  std::vector<StepBreakdown> parts;  ///< per block of `pl`
};

/// Places one micro-batch's chunks (`chunk`, indexed chunk-major: chunk c on stage c % pp) with
/// `schedule` over `pp` stages, forward only or training.
ChunkPlacement chunk_placement(const std::vector<Timing>& chunk, int64_t pp,
                               const pipeline::PipelineSchedule& schedule, bool train);

}  // namespace heddle::cost
