// `heddle run` with pp > 1: the flags turned into the runtime's pipeline run request
// (PipelineRunPlan.h). Both backends use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "RunCommand.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/PipelineRunPlan.h"

namespace heddle::cli {

/// Without pipeline stages, keys a run cannot honour are diagnostics naming them: `recompute`
/// other than none (the run keeps every activation), `schedule` other than the default 1f1b
/// (which plan prints for pp=1), and `mb` / `microbatches`
/// giving more than one micro-batch of `full`'s batch (no gradient accumulation without pp).
Status check_unpipelined_keys(const Graph& full, const StrategySpec& spec);

/// The pipeline `spec` (requested_strategy() of `o`) asks for (pp > 1) for `full` (MODEL at its
/// batch; with its loss for --train), planned by the runtime's plan_pipeline_run(); nothing when
/// it asks for none (after check_unpipelined_keys()). `--emit` with pp is a diagnostic (stage
/// programs are not written). `recompute` is executed as given (default none: backward blocks
/// read the forward's stash); sub-meshes of different shapes run on threads only.
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec);

}  // namespace heddle::cli
