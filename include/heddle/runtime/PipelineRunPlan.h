// A pipeline run planned from a whole model: the micro-batch policy applied, the model rebuilt at
// the micro-batch size where it can be, split into stages and planned per stage
// (build_pipeline). `heddle run` with pp > 1 on either backend.
#pragma once

#include <functional>
#include <string>

#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/PipelineProgram.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle {

/// What a pipeline run is planned from.
struct PipelineRunRequest {
  /// The model at its batch (with its loss for training). Not owned; must be set.
  const Graph* full = nullptr;
  /// The same model at another batch (zoo models); null: the model cannot be rebuilt and runs
  /// as one micro-batch. Default null.
  std::function<Result<Graph>(int64_t batch)> rebuild;
  StrategySpec spec;           ///< the strategy, pp > 1
  int64_t devices = 1;         ///< devices of the run's mesh; must equal the strategy's
  bool train = false;          ///< training step pipelines; default forward only
  TrainStepOptions optimizer;  ///< the optimizer of training pipelines; default AdamW
  /// Tactics pinned in each stage's blocks (PipelineOptions::tactics); default none.
  std::vector<Tactic> tactics;
};

/// A pipeline run's program and what its summary says.
struct PipelinePlan {
  PipelineProgram program;
  Mesh mesh;  ///< the whole mesh: pp outermost, then the stage's axes
  StrategySpec spec;
  std::string note;  ///< for the summary's `plan` line
};

/// Plans the pipeline of `request.full`. Micro-batches by StrategySpec::micro_batching (the one
/// policy, as simulate counts them); models that cannot be rebuilt, and models with top-2 gating
/// (whose routing depends on the whole batch), run as one micro-batch. Diagnostics: sizes that do
/// not divide, a mesh of the wrong size, what build_pipeline() rejects.
Result<PipelinePlan> plan_pipeline_run(const PipelineRunRequest& request);

}  // namespace heddle
