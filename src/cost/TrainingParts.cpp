#include "heddle/cost/TrainingParts.h"

#include <fmt/format.h>

#include <array>

#include "heddle/ops/Autodiff.h"

namespace heddle::cost {

namespace {

// Forward, backward and optimizer cost of the step of the model built with `layers` layers.
Result<std::array<PartCost, 3>> step_cost(const model::ScalableModel& model, int64_t layers,
                                          const Mesh& mesh, const Cluster& cluster,
                                          const StrategySpec& spec, int64_t batch,
                                          bool executor_io) {
  auto forward = model.build_loss(layers, batch);
  HEDDLE_TRY(forward);
  const int64_t forward_ops = forward->num_ops();
  auto step = build_train_step(*forward);
  HEDDLE_TRY(step);
  const Graph& g = step->graph;
  auto prop = stage_plan(g, mesh, cluster, spec);
  HEDDLE_TRY(prop);
  // build_gradients appends the backward ops after the forward ones, then the updates.
  std::vector<int> group(static_cast<size_t>(g.num_ops()));
  for (OpId id = 0; id < g.num_ops(); ++id)
    group[static_cast<size_t>(id)] =
        id < forward_ops                                                 ? 0
        : op_kind_info(g.op(id).kind).category == OpCategory::kOptimizer ? 2
                                                                         : 1;
  auto parts = cost_op_groups(g, mesh, *prop, cluster, group, 3);
  HEDDLE_TRY(parts);
  std::array<PartCost, 3> r = {(*parts)[0], (*parts)[1], (*parts)[2]};
  if (executor_io) {
    auto out = cost_executor_io(g, mesh, *prop, cluster);
    HEDDLE_TRY(out);
    r[2] = r[2] + *out;
  }
  return r;
}

// a - b with every field clamped at zero (fusion or a different propagation choice at the unit
// boundary can make the difference of two costings slightly negative).
PartCost minus(const PartCost& a, const PartCost& b) {
  PartCost r = a + b.scaled(-1);
  for (double* f : {&r.compute_s, &r.comm_s, &r.ep_comm_s, &r.dp_comm_s, &r.flops, &r.comm_bytes,
                    &r.attention_s, &r.saved_bytes, &r.attention_bytes, &r.param_elements})
    *f = std::max(*f, 0.0);
  r.ops = std::max<int64_t>(r.ops, 0);
  return r;
}

}  // namespace

Result<TrainingParts> cost_training_parts(const model::ScalableModel& model, const Mesh& mesh,
                                          const Cluster& cluster, const StrategySpec& spec,
                                          int64_t batch, bool layered, bool executor_io) {
  if (!model.build_loss)
    return Diagnostic(
        fmt::format("model '{}' has no loss to build a training step from", model.name));
  TrainingParts t;
  if (!layered) {
    auto all = step_cost(model, 0, mesh, cluster, spec, batch, executor_io);
    HEDDLE_TRY(all);
    t.fwd_rest = (*all)[0];
    t.bwd_rest = (*all)[1];
    t.opt_rest = (*all)[2];
    return t;
  }
  auto one = step_cost(model, model.unit, mesh, cluster, spec, batch, executor_io);
  HEDDLE_TRY(one);
  auto two = step_cost(model, 2 * model.unit, mesh, cluster, spec, batch, executor_io);
  HEDDLE_TRY(two);
  PartCost* layer[3] = {&t.fwd_layer, &t.bwd_layer, &t.opt_layer};
  PartCost* rest[3] = {&t.fwd_rest, &t.bwd_rest, &t.opt_rest};
  for (size_t k = 0; k < 3; ++k) {
    *layer[k] = minus((*two)[k], (*one)[k]);
    *rest[k] = minus((*one)[k], *layer[k]);
  }
  return t;
}

}  // namespace heddle::cost
