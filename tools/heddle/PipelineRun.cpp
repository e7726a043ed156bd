#include "PipelineRun.h"

#include <fmt/format.h>

namespace heddle::cli {

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
  auto given = Mesh::parse(o.mesh);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  if (spec.heterogeneous() && o.backend == "mpi")
    return Diagnostic(fmt::format(
        "--strategy {}: pipeline stages on sub-meshes of different shapes run on threads "
        "(--backend threads); the MPI backend runs stages of one shape",
        spec.to_string()));
  auto plan = plan_pipeline_run({.full = &full,
                                 .rebuild = model::batch_rebuilder(model_request(o)),
                                 .spec = spec,
                                 .devices = given->num_devices(),
                                 .train = o.train,
                                 .optimizer = train_step_options(o)});
  HEDDLE_TRY(plan);
  return std::optional<PipelinePlan>(std::move(*plan));
}

}  // namespace heddle::cli
