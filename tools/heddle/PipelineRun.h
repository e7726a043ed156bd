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

/// The strategy `--mesh` and `--strategy` ask for (a named mesh doubles as the strategy); a
/// default StrategySpec when neither names one. Diagnostics name the option.
Result<StrategySpec> requested_strategy(const std::string& mesh_text,
                                        const std::string& strategy_text);

/// Plans the pipeline of `full` (MODEL at its batch; with its loss for --train) for `spec`
/// (pp > 1) on the devices of `o.mesh`. Micro-batches: `microbatches` or `mb` (per dp replica)
/// from the strategy, else one sample per replica as heddle simulate does; zoo models are rebuilt
/// at the micro-batch size, other models (and models with top-2 gating, whose routing depends on
/// the whole batch) run as one micro-batch. Diagnostics: sizes that do not
/// divide, a mesh of the wrong size, what build_pipeline() rejects.
Result<PipelinePlan> plan_pipeline(const RunOptions& o, const Graph& full,
                                   const StrategySpec& spec);

/// The pipeline `o` asks for (a strategy with pp > 1), planned with plan_pipeline(); nothing when
/// it asks for none. `--emit` with pp is a diagnostic (stage programs are not written).
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full);

/// The pipeline feeds of a step of `g` (the training step or the model, parameters and inputs by
/// value id in `feeds`, which may hold only some parameters): parameters by name, inputs cut
/// into micro-batches.
PipelineFeeds to_pipeline_feeds(const PipelinePlan& plan, const Graph& g, const TensorMap& feeds);

/// Global device `device`'s tiles of the pipeline feeds of a step of `g` (the training step or
/// the model, at the whole batch), exactly what PipelineProgram::device_loads(device) names:
/// parameters and state from init_param_tile(seed), micro-batch tiles of the inputs cut from
/// random_input_tile(seed + 1, int_hi) of the whole batch, so they equal the whole tensors'
/// elements.
PipelineFeeds device_pipeline_feeds(const PipelinePlan& plan, const Graph& g, int64_t device,
                                    uint64_t seed, int64_t int_hi);

/// The outputs of `g` from device 0's pipeline result: the model outputs (micro-batches
/// concatenated; the loss averaged over them), updated parameters and state, and gradients when
/// `g` outputs them.
Result<TensorMap> from_pipeline_result(const PipelinePlan& plan, const Graph& g,
                                       const std::vector<ParamUpdate>& updates,
                                       const PipelineResult& r);

}  // namespace heddle::cli
