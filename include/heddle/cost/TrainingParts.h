// TrainingParts: the cost of a model's autodiff training step (forward with loss, backward,
// optimizer update) on a pipeline stage's representative device, per repeating layer and for the
// rest of the model, found by differencing the steps of models with one and two layer units.
#pragma once

#include "heddle/cost/ModelParts.h"
#include "heddle/cost/Simulator.h"

namespace heddle::cost {

/// Forward, backward and optimizer cost of one repeating unit and of the ops outside the units
/// (embedding, head, loss). Models without layers have everything in the `_rest` fields.
struct TrainingParts {
  PartCost fwd_layer, fwd_rest;  ///< forward ops of the step (with the loss)
  PartCost bwd_layer, bwd_rest;  ///< gradient ops
  PartCost opt_layer, opt_rest;  ///< optimizer updates, the gradient reductions they wait for
                                 ///< and, when asked for, the executor's loads and gathers
};

/// Costs the training step of `model` (model::ScalableModel::build_loss at `batch`,
/// build_train_step with AdamW) sharded by stage_plan() of `spec` on the stage mesh `mesh`.
/// `layered`: difference the steps built with one and two units; else cost the model as built.
/// `executor_io` adds cost_executor_io() of the step to the optimizer part. Diagnostics: no
/// build_loss, and those of the builders, autodiff and propagation.
Result<TrainingParts> cost_training_parts(const model::ScalableModel& model, const Mesh& mesh,
                                          const Cluster& cluster, const StrategySpec& spec,
                                          int64_t batch, bool layered, bool executor_io);

}  // namespace heddle::cost
