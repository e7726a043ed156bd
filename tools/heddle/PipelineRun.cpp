#include "PipelineRun.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "Command.h"
#include "Planning.h"
#include "heddle/ops/TileInit.h"
#include "heddle/support/Assert.h"

namespace heddle::cli {

namespace {

// `2` when every stage has 2 devices, else each stage's: `2/1/2`.
std::string stage_sizes(const PipelineProgram& P) {
  if (P.stage_devices > 0) return std::to_string(P.stage_devices);
  std::vector<std::string> n;
  for (int64_t s = 0; s < P.stages; ++s) n.push_back(std::to_string(P.devices_of(s)));
  return fmt::format("{}", fmt::join(n, "/"));
}

}  // namespace

Result<PipelinePlan> plan_pipeline(const RunOptions& o, const Graph& full,
                                   const StrategySpec& spec) {
  auto given = Mesh::parse(o.mesh);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  // Stages on sub-meshes of different shapes have no one mesh: the summary shows the devices.
  Result<Mesh> mesh = *given;
  if (spec.heterogeneous()) {
    if (spec.devices() != given->num_devices())
      return Diagnostic(fmt::format("--strategy {} uses {} devices, but --mesh gives {}",
                                    spec.to_string(), spec.devices(), given->num_devices()));
    if (o.backend == "mpi")
      return Diagnostic(fmt::format(
          "--strategy {}: pipeline stages on sub-meshes of different shapes run on threads "
          "(--backend threads); the MPI backend runs stages of one shape",
          spec.to_string()));
  } else {
    mesh = spec.mesh(given->num_devices());
  }
  HEDDLE_TRY(mesh);
  const int64_t pp = *spec.pp;
  const bool zoo = zoo::is_zoo_model(o.model);
  // Top-2 gating sizes expert capacity from the tokens it sees: split into micro-batches, the
  // model drops other tokens than on the whole batch, a different computation.
  bool gating = false;
  for (const Op& op : full.ops()) gating |= op.kind == OpKind::kTop2Gating;
  const int64_t B = full.inputs().empty() || full.type(full.inputs()[0]).rank() == 0
                        ? 1
                        : full.type(full.inputs()[0]).shape()[0];
  // Micro-batches, as heddle simulate counts them (zoo models can be rebuilt at the
  // micro-batch size).
  auto batching = spec.micro_batching(B, zoo && !gating);
  HEDDLE_TRY(batching);
  const int64_t m = batching->count;
  if (gating && m > 1)
    return Diagnostic(fmt::format(
        "{} has top-2 gating, whose expert capacity depends on the tokens of a batch: {} "
        "micro-batches would route differently from the whole batch; use microbatches=1",
        full.name(), m));
  if (m > 1 && !zoo)
    return Diagnostic(fmt::format(
        "{} micro-batches need the model rebuilt at batch {}; only zoo models can be, so a model "
        "from a file runs as one micro-batch (microbatches=1)",
        m, B / m));
  Graph micro = full;
  if (m > 1) {
    zoo::ZooOverrides over = o.overrides;
    over.batch = B / m;
    auto g = zoo::build_zoo_model(o.model, over, {.with_loss = o.train});
    HEDDLE_TRY(g);
    micro = std::move(*g);
  }
  PipelineOptions po;
  po.stages = pp;
  po.micro_batches = m;
  po.schedule = spec.schedule.value_or(pipeline::PipelineSchedule{});
  po.train = o.train;
  po.inner = spec;
  po.layers = spec.layers;
  po.recompute = spec.recompute.value_or(Recompute::kNone);
  if (!o.train && spec.recompute && *spec.recompute != Recompute::kNone)
    return Diagnostic(fmt::format(
        "recompute={}: a forward-only run has no backward to recompute for; drop the key or "
        "add --train",
        to_string(*spec.recompute)));
  po.optimizer.optimizer = o.optimizer == "sgd" ? TrainStepOptions::Optimizer::kSgdMomentum
                                                : TrainStepOptions::Optimizer::kAdamW;
  po.optimizer.adamw.lr = o.lr;
  po.optimizer.sgd.lr = o.lr;
  auto program = build_pipeline(micro, po);
  HEDDLE_TRY(program);
  PipelinePlan plan{std::move(*program), *mesh, spec, ""};
  std::string executed;
  if (o.train) {
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
  return plan;
}

Status check_unpipelined_keys(const Graph& full, const StrategySpec& spec) {
  const std::string why = "heddle run does that only with pipeline stages (pp > 1)";
  if (spec.recompute && *spec.recompute != Recompute::kNone)
    return Diagnostic(fmt::format(
        "recompute={}: {}; without pp it keeps every activation (recompute=none): drop the key "
        "or add pp",
        to_string(*spec.recompute), why));
  // 1F1B is the default wherever it matters (what plan prints with pp=1): nothing to honour.
  if (spec.schedule && spec.schedule->kind != pipeline::ScheduleKind::k1f1b)
    return Diagnostic(fmt::format(
        "schedule={} orders pipeline stages; without pp > 1 there are none to order: drop the key "
        "or add pp",
        spec.schedule->to_string()));
  if (spec.micro_batch || spec.microbatches) {
    const int64_t B = full.inputs().empty() || full.type(full.inputs()[0]).rank() == 0
                          ? 1
                          : full.type(full.inputs()[0]).shape()[0];
    auto batching = spec.micro_batching(B, false);
    HEDDLE_TRY(batching);
    const int64_t count = batching->count;
    if (count > 1)
      return Diagnostic(fmt::format(
          "{}: {} micro-batches of the batch of {}; {}, without it the batch runs whole: drop "
          "the key or add pp",
          spec.micro_batch ? fmt::format("mb={}", *spec.micro_batch)
                           : fmt::format("microbatches={}", *spec.microbatches),
          count, B, why));
  }
  return {};
}

Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec) {
  if (spec.pp.value_or(1) <= 1) {
    HEDDLE_TRY(check_unpipelined_keys(full, spec));
    return std::optional<PipelinePlan>();
  }
  if (!o.emit_dir.empty())
    return Diagnostic(
        "--emit writes the programs of runs without pipeline stages; drop pp from the strategy "
        "to see one stage's programs");
  auto plan = plan_pipeline(o, full, spec);
  HEDDLE_TRY(plan);
  return std::optional<PipelinePlan>(std::move(*plan));
}

}  // namespace heddle::cli
