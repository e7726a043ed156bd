// A pipeline run planned from a whole model: micro-batches, the micro-batch model, the stages.
#include "heddle/runtime/PipelineRunPlan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace heddle {

namespace {

// Top-2 gating sizes expert capacity from the tokens it sees: split into micro-batches, the
// model drops other tokens than on the whole batch, a different computation.
bool has_topk_gating(const Graph& g) {
  for (const Op& op : g.ops())
    if (op.kind == OpKind::kTopkGating) return true;
  return false;
}

int64_t batch_of(const Graph& g) {
  return g.inputs().empty() || g.type(g.inputs()[0]).rank() == 0 ? 1
                                                                 : g.type(g.inputs()[0]).shape()[0];
}

// `2` when every stage has 2 devices, else each stage's: `2/1/2`.
std::string stage_sizes(const PipelineProgram& P) {
  if (P.stage_devices > 0) return std::to_string(P.stage_devices);
  std::vector<std::string> n;
  for (int64_t s = 0; s < P.stages; ++s) n.push_back(std::to_string(P.devices_of(s)));
  return fmt::format("{}", fmt::join(n, "/"));
}

}  // namespace

Result<PipelinePlan> plan_pipeline_run(const PipelineRunRequest& r) {
  const Graph& full = *r.full;
  const StrategySpec& spec = r.spec;
  // Stages on sub-meshes of different shapes have no one mesh: the summary shows the devices.
  Result<Mesh> mesh = Mesh{};
  if (spec.heterogeneous()) {
    if (spec.devices() != r.devices)
      return Diagnostic(fmt::format("--strategy {} uses {} devices, but --mesh gives {}",
                                    spec.to_string(), spec.devices(), r.devices));
    mesh = Mesh::parse(std::to_string(r.devices));
  } else {
    mesh = spec.mesh(r.devices);
  }
  HEDDLE_TRY(mesh);
  const int64_t pp = *spec.pp;
  const bool gating = has_topk_gating(full);
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
  po.recompute = spec.recompute.value_or(Recompute::kNone);
  if (!r.train && spec.recompute && *spec.recompute != Recompute::kNone)
    return Diagnostic(fmt::format(
        "recompute={}: a forward-only run has no backward to recompute for; drop the key or "
        "add --train",
        to_string(*spec.recompute)));
  po.optimizer = r.optimizer;
  po.tactics = r.tactics;
  auto program = build_pipeline(micro, po);
  HEDDLE_TRY(program);
  PipelinePlan plan{std::move(*program), *mesh, spec, ""};
  std::string executed;
  if (r.train) {
    const PipelineCounts n = plan.program.step_counts();
    size_t stashed = 0;
    for (const auto& c : plan.program.chunks) stashed += c.stashed.size();
    executed = fmt::format(
        "; recompute={} executed: {} of {} kernel calls per step recompute the forward, "
        "backward blocks read {} stashed activation(s)",
        to_string(plan.program.recompute), n.recompute_calls, n.kernel_calls, stashed);
  }
  plan.note = fmt::format(
      "strategy {} on mesh {}: {} stages of {} device(s), {} chunks, {} micro-batches of {}, "
      "schedule {}{}",
      spec.to_string(), mesh->to_string(), pp, stage_sizes(plan.program),
      plan.program.chunks.size(), m, B / m, plan.program.schedule.to_string(), executed);
  if (!r.tactics.empty()) plan.note += fmt::format(" with {} tactic(s)", r.tactics.size());
  return plan;
}

}  // namespace heddle
