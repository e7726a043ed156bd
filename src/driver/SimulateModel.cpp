// The simulate request (heddle/driver/SimulateModel.h).
#include "heddle/driver/SimulateModel.h"

#include "heddle/cost/StepReport.h"
#include "heddle/export/PlanTarget.h"
#include "heddle/search/ConfigSearch.h"
#include "heddle/support/ByteSize.h"

namespace heddle::driver {

Result<cost::Cluster> resolve_cluster(const std::string& spec, const std::string& memory) {
  auto cluster = cost::resolve_cluster(spec);
  HEDDLE_TRY(cluster);
  if (!memory.empty()) {
    auto m = parse_bytes(memory);
    HEDDLE_TRY(m);
    cluster->for_each_device([&](cost::DeviceProfile& d) { d.memory_bytes = *m; });
  }
  return cluster;
}

Result<SimulatedModel> simulate_model(const SimulateModelRequest& r, const cost::Cluster& cluster) {
  model::ModelRequest mr = r.model;
  mr.options = {};
  auto src = model::load_scalable_model(mr);
  HEDDLE_TRY(src);
  return simulate_resolved(r, cluster, std::move(*src));
}

Result<SimulatedModel> simulate_resolved(const SimulateModelRequest& r,
                                         const cost::Cluster& cluster, model::ScalableModel model) {
  auto spec = StrategySpec::parse(r.strategy);
  HEDDLE_TRY(spec);
  SimulatedModel out{.model = std::move(model), .priced = {}, .export_plan = {}};
  cost::SimulateOptions opts;
  if (r.stage_planner == "ilp")  // the stages `heddle plan` re-planned with the intra-op ILP
    opts = search::intra_op_simulate_options(out.model, cluster, r.train, 60, nullptr);
  else if (r.stage_planner != "tactics")
    return Diagnostic("--stage-planner '" + r.stage_planner +
                      "' is not a stage planner; use tactics or ilp");
  opts.train = r.train;
  opts.overlap = r.overlap;
  opts.trace = r.trace;
  opts.autodiff = r.executor;
  opts.executor_io = r.executor;
  auto sim = cost::simulate(out.model, cluster, *spec, opts);
  HEDDLE_TRY(sim);
  out.priced =
      search::ConfigResult{.spec = *spec, .sim = std::move(*sim), .stage_planner = r.stage_planner};
  out.export_plan = exporting::export_plan_of(out.model, cluster, out.priced, r.train);
  return out;
}

nlohmann::json simulate_report_json(const SimulatedModel& s) {
  nlohmann::json j = cost::simulation_json(s.result(), s.model);
  // A simulated strategy has no target and no reserve of its own: only who runs it and how.
  exporting::add_target_json(j, exporting::PlanTarget{}, s.export_plan);
  j.erase("target");
  j.erase("memory_reserve_bytes");
  return j;
}

}  // namespace heddle::driver
