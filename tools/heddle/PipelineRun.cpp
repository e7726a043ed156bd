#include "PipelineRun.h"

namespace heddle::cli {

Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunOptions& o, const Graph& full,
                                                      const StrategySpec& spec) {
  if (spec.pp.value_or(1) <= 1) return std::optional<PipelinePlan>();
  if (!o.emit_dir.empty())
    return Diagnostic(
        "--emit writes the programs of runs without pipeline stages; drop pp from the strategy "
        "to see one stage's programs");
  auto given = Mesh::parse(o.mesh);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
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
