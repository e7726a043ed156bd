#include "heddle/search/PlanRequest.h"

#include <fmt/format.h>

#include "heddle/cost/StepReport.h"
#include "heddle/search/PlanReport.h"

namespace heddle::search {

Result<ConfigSearchOptions> plan_search_options(const PlanRequest& r,
                                                const cost::Cluster& cluster) {
  ConfigSearchOptions o;
  if (r.objective == "energy") {
    if (cluster.device.tdp_watts <= 0)
      return Diagnostic("--objective energy: device '" + cluster.device.name +
                        "' has no power figures (tdp_watts, idle_watts)");
    o.objective = Objective::kEnergy;
  } else if (r.objective != "time") {
    return Diagnostic("--objective '" + r.objective + "' is not an objective; use time or energy");
  }
  if (r.max_devices < 0)
    return Diagnostic("--max-devices must be positive, not " + std::to_string(r.max_devices));
  if (r.target_step_time_s < 0) return Diagnostic("--target-step-time must be positive seconds");
  if (!(r.time_limit_s >= 0))
    return Diagnostic("--time-limit must be zero or more seconds, not " +
                      fmt::format("{:g}", r.time_limit_s));
  o.max_devices = r.max_devices;
  o.target_step_time_s = r.target_step_time_s;
  o.train = r.train;
  o.overlap = r.overlap;
  o.pins = r.pins;
  o.time_limit_s = r.time_limit_s;
  return o;
}

nlohmann::json plan_file_json(const ConfigSearch& found, const model::ScalableModel& src,
                              const std::string& model, const cost::Cluster& cluster, bool train) {
  nlohmann::json plan = plan_json(found.best);
  cost::add_step_json(plan, found.best.sim, src, "stage_meshes");
  plan["ranking"] = ranking_json(found.ranking);
  plan["model"] = model;
  plan["cluster"] = cluster.name;
  plan["train"] = train;
  plan["cluster_devices"] = cluster.count;
  return plan;
}

Result<std::string> plan_trace(const model::ScalableModel& src, const cost::Cluster& cluster,
                               const ConfigResult& best, bool train, bool overlap,
                               double time_limit_s) {
  cost::Cluster used = cluster;
  used.count = best.sim.devices;
  cost::SimulateOptions so;
  if (best.stage_planner != "tactics")  // trace the plan that won: the ILP's stages
    so = intra_op_simulate_options(src, used, train, time_limit_s, nullptr);
  so.train = train;
  so.overlap = overlap;
  so.trace = true;
  auto traced = cost::simulate(src, used, best.spec, so);
  HEDDLE_TRY(traced);
  return std::move(traced->trace_json);
}

}  // namespace heddle::search
