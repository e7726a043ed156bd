// `heddle run` with pp > 1: the flags handed to the driver's pipeline planning
// (heddle/driver/RunRequest.h, pipeline_if_asked). Both backends use it.
#pragma once

#include <optional>

#include "RunCommand.h"
#include "heddle/runtime/PipelineRunPlan.h"

namespace heddle::cli {

/// driver::pipeline_if_asked() for the request `o` makes (run_request()).
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec);

}  // namespace heddle::cli
