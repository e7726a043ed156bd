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

/// The pipeline `spec` (requested_strategy() of `o`) asks for (pp > 1) for `full` (MODEL at its
/// batch; with its loss for --train), planned by the runtime's plan_pipeline_run(); nothing when
/// it asks for none. `--emit` with pp is a diagnostic (stage
/// programs are not written).
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec);

}  // namespace heddle::cli
