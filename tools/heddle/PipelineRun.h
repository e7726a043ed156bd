// `heddle run` with pp > 1: the model rebuilt at micro-batch size, split into stages and planned
// per stage (build_pipeline), and the conversions between the run's tensors (by value id of the
// training step or model) and the pipeline's (by name, per micro-batch). Both backends use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "RunCommand.h"
#include "heddle/runtime/PipelineExecutor.h"

namespace heddle::cli {

/// A pipeline run's program and what its summary says.
struct PipelinePlan {
  PipelineProgram program;
  Mesh mesh;  ///< the whole mesh: pp outermost, then the stage's axes
  StrategySpec spec;
  std::string note;  ///< for the summary's `plan` line
};

/// Plans the pipeline of `full` (MODEL at its batch; with its loss for --train) for `spec`
/// (pp > 1) on the devices of `o.mesh`. Micro-batches: `microbatches` or `mb` (per dp replica)
/// from the strategy, else one sample per replica as heddle simulate does; zoo models are rebuilt
/// at the micro-batch size, other models (and models with top-2 gating, whose routing depends on
/// the whole batch) run as one micro-batch. Diagnostics: sizes that do not
/// divide, a mesh of the wrong size, what build_pipeline() rejects.
Result<PipelinePlan> plan_pipeline(const RunOptions& o, const Graph& full,
                                   const StrategySpec& spec);

/// Without pipeline stages, keys a run cannot honour are diagnostics naming them: `recompute`
/// other than none (the run keeps every activation), `schedule` other than the default 1f1b
/// (which plan prints for pp=1), and `mb` / `microbatches`
/// giving more than one micro-batch of `full`'s batch (no gradient accumulation without pp).
Status check_unpipelined_keys(const Graph& full, const StrategySpec& spec);

/// The pipeline `spec` (requested_strategy() of `o`) asks for (pp > 1), planned with
/// plan_pipeline(); nothing when it asks for none (after check_unpipelined_keys()). `--emit`
/// with pp is a diagnostic (stage programs are not written). `recompute` is executed as given
/// (default none: backward blocks read the forward's stash); with a forward-only run, recompute
/// other than none is a diagnostic.
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec);

}  // namespace heddle::cli
