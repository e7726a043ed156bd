// A pipeline run planned from a whole model: micro-batches, the micro-batch model, the stages.
#include "heddle/runtime/PipelineRunPlan.h"

#include <fmt/format.h>

namespace heddle {

namespace {

// Top-2 gating sizes expert capacity from the tokens it sees: split into micro-batches, the
// model drops other tokens than on the whole batch, a different computation.
bool has_top2_gating(const Graph& g) {
  for (const Op& op : g.ops())
    if (op.kind == OpKind::kTop2Gating) return true;
  return false;
}

int64_t batch_of(const Graph& g) {
  return g.inputs().empty() || g.type(g.inputs()[0]).rank() == 0 ? 1
                                                                 : g.type(g.inputs()[0]).shape()[0];
}

}  // namespace

Result<PipelinePlan> plan_pipeline_run(const PipelineRunRequest& r) {
  const Graph& full = *r.full;
  const StrategySpec& spec = r.spec;
  auto mesh = spec.mesh(r.devices);
  HEDDLE_TRY(mesh);
  const int64_t pp = *spec.pp;
  const bool gating = has_top2_gating(full);
  const int64_t B = batch_of(full);
  auto batching = spec.micro_batching(B, r.rebuild != nullptr && !gating);
  HEDDLE_TRY(batching);
  const int64_t m = batching->count;
  if (gating && m > 1)
    return Diagnostic(fmt::format(
        "{} has top-2 gating, whose expert capacity depends on the tokens of a batch: {} "
        "micro-batches would route differently from the whole batch; use microbatches=1",
        full.name(), m));
  if (m > 1 && !r.rebuild)
    return Diagnostic(fmt::format(
        "{} micro-batches need the model rebuilt at batch {}; only zoo models can be, so a model "
        "from a file runs as one micro-batch (microbatches=1)",
        m, B / m));
  Graph micro = full;
  if (m > 1) {
    auto g = r.rebuild(B / m);
    HEDDLE_TRY(g);
    micro = std::move(*g);
  }
  PipelineOptions po;
  po.stages = pp;
  po.micro_batches = m;
  po.schedule = spec.schedule.value_or(pipeline::PipelineSchedule{});
  po.train = r.train;
  po.inner = spec;
  po.layers = spec.layers;
  po.optimizer = r.optimizer;
  auto program = build_pipeline(micro, po);
  HEDDLE_TRY(program);
  PipelinePlan plan{std::move(*program), *mesh, spec, ""};
  plan.note = fmt::format(
      "strategy {} on mesh {}: {} stages of {} device(s), {} chunks, {} micro-batches of {}, "
      "schedule {}{}",
      spec.to_string(), mesh->to_string(), pp, plan.program.stage_devices,
      plan.program.chunks.size(), m, B / m, plan.program.schedule.to_string(),
      r.train ? " (backward blocks recompute their chunk's forward, as recompute=full)" : "");
  return plan;
}

}  // namespace heddle
