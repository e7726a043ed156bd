// The Chrome trace of a simulated step (private to the simulator): the pipeline schedule's
// blocks with named spans inside them (compute, recompute, collectives, sends), the bubbles
// between them, gradient reduction and optimizer at the end, and memory over time.
#pragma once

#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"
#include "heddle/cost/StepBreakdown.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::cost {

/// What step_trace() draws. `block_parts[b]` splits block `b`'s span of `pl` into categories;
/// `end[d]` is when stage d's last block ends, `tail_sync[d]` and `tail_opt[d]` its gradient
/// reduction and optimizer after that; `res` has the stages and the step time.
struct StepTraceInput {
  const pipeline::BlockPlacement* pl = nullptr;
  const pipeline::Schedule* schedule = nullptr;
  const std::vector<StepBreakdown>* block_parts = nullptr;
  const SimulationResult* res = nullptr;
  const std::vector<double>* end = nullptr;
  const std::vector<double>* tail_sync = nullptr;
  const std::vector<double>* tail_opt = nullptr;
};

/// The trace as Chrome-trace JSON (Perfetto opens it). Deterministic.
std::string step_trace(const StepTraceInput& in);

}  // namespace heddle::cost
