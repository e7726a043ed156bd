// Reverse-mode autodiff driver and the training-step builder.
#include "heddle/ops/Autodiff.h"

#include "GradRules.h"
#include "heddle/ir/Verifier.h"

namespace heddle {

Result<Gradients> build_gradients(const Graph& forward, ValueId loss,
                                  const std::set<std::string>& frozen) {
  if (loss < 0 || loss >= forward.num_values())
    return Diagnostic("autodiff: the loss is not a value of the graph");
  if (forward.type(loss).numel() != 1 || !dtype_is_float(forward.type(loss).dtype()))
    return Diagnostic("autodiff: the loss %" + forward.value(loss).name +
                      " must be a float scalar, got " + forward.type(loss).to_string());
  Gradients out{forward, loss, {}};
  Graph& g = out.graph;
  // Values that depend on a parameter through ops gradients flow back through, and that the loss
  // depends on, carry gradients. No gradient flows through updates or routing decisions, so their
  // results carry none (a MoE's dispatch and combine tensors: their gradients would be two
  // [tokens, experts x capacity] contractions whose results nobody reads).
  auto stops_gradient = [](const Op& op) {
    return op_kind_info(op.kind).category == OpCategory::kOptimizer ||
           op.kind == OpKind::kTopkGating;
  };
  std::vector<bool> from_param(static_cast<size_t>(g.num_values()), false);
  for (ValueId p : g.params()) from_param[p] = !frozen.count(g.value(p).name);
  OpId n_fwd = static_cast<OpId>(g.num_ops());
  for (OpId i = 0; i < n_fwd; ++i) {
    const Op& op = g.op(i);
    bool any = false;
    for (const auto& in : op.inputs) any = any || from_param[in.value];
    for (const auto& r : op.results) from_param[r.value] = any && !stops_gradient(op);
  }
  std::vector<bool> to_loss(static_cast<size_t>(g.num_values()), false);
  to_loss[loss] = true;
  for (OpId i = n_fwd - 1; i >= 0; --i) {
    const Op& op = g.op(i);
    bool any = false;
    for (const auto& r : op.results) any = any || to_loss[r.value];
    if (any)
      for (const auto& in : op.inputs) to_loss[in.value] = true;
  }
  Ops ops(g);
  std::vector<ValueId> grad(static_cast<size_t>(g.num_values()), kNoValue);
  if (!from_param[loss]) return out;
  grad[loss] = ops.fill_like(loss, 1.0);
  for (OpId i = n_fwd - 1; i >= 0; --i) {
    const Op& op = g.op(i);
    ValueId r0 = op.results[0].value;
    if (grad[r0] == kNoValue || !from_param[r0]) continue;
    std::vector<ValueId> inputs;
    std::vector<bool> wanted;
    for (const auto& in : op.inputs) {
      inputs.push_back(in.value);
      wanted.push_back(from_param[in.value] && to_loss[in.value]);
    }
    auto contrib = grad_detail::op_gradients(ops, i, grad[r0], wanted);
    HEDDLE_TRY(contrib);
    HEDDLE_TRY(ops.status());
    for (size_t k = 0; k < inputs.size(); ++k) {
      ValueId v = inputs[k], d = (*contrib)[k];
      if (d == kNoValue || !from_param[v] || !to_loss[v]) continue;
      grad[v] = grad[v] == kNoValue ? d : ops.add(grad[v], d);
    }
  }
  HEDDLE_TRY(ops.status());
  for (ValueId p : g.params())
    if (grad[p] != kNoValue) out.grads.emplace_back(p, grad[p]);
  HEDDLE_TRY(verify_ok(g));
  return out;
}

Result<TrainStep> build_train_step(const Graph& forward, const TrainStepOptions& options) {
  if (forward.outputs().size() != 1)
    return Diagnostic("training needs a graph whose single output is the loss; this one has " +
                      std::to_string(forward.outputs().size()) + " outputs");
  auto grads = build_gradients(forward, forward.outputs()[0], options.frozen);
  HEDDLE_TRY(grads);
  TrainStep step{std::move(grads->graph), grads->loss, {}};
  Graph& g = step.graph;
  Ops ops(g);
  for (auto [p, d] : grads->grads) {
    std::string name = g.value(p).name;
    TensorType t = g.type(p);
    ParamUpdate u{p, d, kNoValue, {}};
    if (options.optimizer == TrainStepOptions::Optimizer::kAdamW) {
      ValueId m = ops.param("m." + name, t), v = ops.param("v." + name, t);
      auto r = ops.adamw(p, d, m, v, options.adamw);
      if (r.size() != 3) break;
      u.updated = r[0];
      u.state = {{m, r[1]}, {v, r[2]}};
    } else {
      ValueId vel = ops.param("vel." + name, t);
      auto r = ops.sgd_momentum(p, d, vel, options.sgd);
      if (r.size() != 2) break;
      u.updated = r[0];
      u.state = {{vel, r[1]}};
    }
    step.updates.push_back(std::move(u));
  }
  HEDDLE_TRY(ops.status());
  // Outputs: the loss (already the forward output), then updated params and state.
  for (const auto& u : step.updates) {
    g.add_output(u.updated);
    for (auto [s, ns] : u.state) g.add_output(ns);
  }
  HEDDLE_TRY(verify_ok(g));
  return step;
}

}  // namespace heddle
