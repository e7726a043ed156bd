// The plan request (heddle/driver/PlanModel.h): checked, searched, priced, exported, written and
// reported.
#include "heddle/driver/PlanModel.h"

#include <fmt/format.h>

#include "heddle/cost/StepReport.h"
#include "heddle/driver/SimulateModel.h"
#include "heddle/ir/DotExport.h"
#include "heddle/search/PlanRequest.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Strings.h"

namespace heddle::driver {

namespace {

// What the plan assumes, restated: the workload, micro-batches, cluster and memory limit, and
// the warnings about defaults.
std::string assumptions_text(const PlannedModel& p) {
  const cost::SimulationResult& r = p.found.best.sim;
  const PlanModelRequest& a = p.request;
  std::string out = fmt::format("workload   {}\n", cost::workload_text(r, p.model));
  out += fmt::format("batches    {}\n", cost::micro_batches_text(r));
  out += fmt::format("assumes    {} per device{}, cluster {} ({}){}\n",
                     human_bytes(r.memory_limit_bytes), a.memory.empty() ? " (the device's)" : "",
                     p.cluster.name, p.cluster.source,
                     a.overlap ? ", overlap=dp+tp unless the strategy says otherwise"
                               : ", the strategy's overlap= or the device's default overlap");
  for (const auto& w : p.warnings) out += fmt::format("warning    {}\n", w);
  return out;
}

// The pipeline, only as far as it applies: one stage has no schedule, a forward step runs its
// micro-batches in order.
std::string pipeline_text(const cost::SimulationResult& r, bool train) {
  if (r.pp == 1) return "pipeline   none (one stage)\n";
  return fmt::format("pipeline   {} stages, schedule {}, bubble {:.1f}%\n", r.pp,
                     train ? r.schedule.to_string() : "forward micro-batches in order",
                     100 * r.bubble_fraction);
}

// How much the search did: the space's size and the simulations, refinements included, and
// whether the winner is proven best.
std::string search_text(const search::ConfigSearch& found) {
  std::string caveat;
  if (!found.complete)
    caveat = " (time limit reached: best found, not proven best)";
  else if (!found.ilp.optimal)
    caveat = " (an ILP hit its time limit: not proven optimal)";
  return fmt::format(
      "search     {} configurations in the space (dominated ones skipped), {} simulations "
      "including refinements (ILP stage plans, layer splits, sub-meshes), {} intra-op ILPs, in "
      "{:.2f} s{}\n",
      found.candidates, found.evaluated, found.ilp.solves, found.search_time_s, caveat);
}

// The winner's sub-meshes (per-stage or mixed clusters), its stage planner, the energy trade-off
// and the step-time target.
std::string stages_text(const PlannedModel& p) {
  const cost::SimulationResult& r = p.found.best.sim;
  const PlanModelRequest& a = p.request;
  std::string out;
  if (r.heterogeneous || p.cluster.mixed()) {
    std::vector<std::string> ms;
    for (const auto& s : r.stages)
      ms.push_back(fmt::format("dp {} x tp {} ({} layers, mb {}){}", s.dp, s.tp, s.layers,
                               s.micro_batch, p.cluster.mixed() ? " on " + s.device : ""));
    out += fmt::format("sub-meshes {}\n", join(ms, " | "));
  }
  if (p.found.best.stage_planner == "tactics")
    out += "stages     sharded by the tactics (Megatron-style propagation)\n";
  else
    out += fmt::format(
        "stages     sharded by the intra-op ILP (beat the tactics); reproduce with heddle "
        "simulate ... --strategy {} --stage-planner ilp\n",
        r.strategy);
  if (auto t = search::stage_splits_text(p.splits); !t.empty()) out += "not split  " + t;
  if (r.energy_j > 0) {
    // How the objectives trade off: the chosen plan against the fastest and the least-energy one.
    const auto& f = p.found.fastest.sim;
    const auto& e = p.found.greenest.sim;
    out += fmt::format("energy     {:.4g} kJ per step ({:.0f} W average over {} devices)\n",
                       r.energy_j / 1e3, r.energy_j / r.step_time_s, r.devices);
    out += fmt::format(
        "trade-off  objective {}: fastest plan {:.4g} s, {:.4g} kJ ({} devices); "
        "least energy {:.4g} s, {:.4g} kJ ({} devices)\n",
        a.objective, f.step_time_s, f.energy_j / 1e3, f.devices, e.step_time_s, e.energy_j / 1e3,
        e.devices);
  }
  if (a.target_step_time_s > 0)
    out +=
        fmt::format("target     {:.4g} s per step: {} devices is the smallest count reaching it\n",
                    a.target_step_time_s, r.devices);
  return out;
}

}  // namespace

Result<PlannedModel> plan_model(const PlanModelRequest& r) {
  if (!r.out_dir.empty()) HEDDLE_TRY(check_writable_dir(r.out_dir, "--out"));
  auto cluster = resolve_cluster(r.cluster, r.memory);
  HEDDLE_TRY(cluster);
  if (auto spec = StrategySpec::parse(r.strategy); !spec.ok())
    return Diagnostic("--strategy: " + spec.error().message);
  model::ModelRequest mr = r.model;
  mr.options = {};
  auto src = model::load_scalable_model(mr);
  HEDDLE_TRY(src);
  return plan_resolved(r, std::move(*cluster), std::move(*src));
}

Result<PlannedModel> plan_resolved(const PlanModelRequest& r, cost::Cluster cluster,
                                   model::ScalableModel model) {
  PlannedModel p;
  p.request = r;
  p.request.progress = nullptr;
  p.cluster = std::move(cluster);
  p.model = std::move(model);
  auto spec = StrategySpec::parse(r.strategy);
  if (!spec.ok()) return Diagnostic("--strategy: " + spec.error().message);
  auto o = search::plan_search_options({.objective = r.objective,
                                        .max_devices = r.max_devices,
                                        .target_step_time_s = r.target_step_time_s,
                                        .time_limit_s = r.time_limit_s,
                                        .train = r.train,
                                        .overlap = r.overlap,
                                        .pins = *spec},
                                       p.cluster);
  HEDDLE_TRY(o);
  auto target = exporting::apply_target_flags(r.target, p.cluster, *o);
  HEDDLE_TRY(target);
  p.target = *target;
  o->progress = r.progress;
  auto found = search::search_configs(p.model, p.cluster, *o);
  if (!found.ok() && p.target.target != exporting::Target::kAny)
    return Diagnostic(found.error().message + " (--target " +
                      exporting::to_string(p.target.target) +
                      ": only strategies it runs were tried)");
  HEDDLE_TRY(found);
  p.found = std::move(*found);
  auto compared = search::price_compared(r.compare, p.model, p.cluster, r.train, r.overlap);
  HEDDLE_TRY(compared);
  p.compared = std::move(*compared);
  p.warnings = cost::workload_warnings(p.model, r.model.overrides.batch.has_value(),
                                       p.found.best.sim.devices, r.train);
  p.best_export = exporting::export_plan_of(p.model, p.cluster, p.found.best, r.train);
  auto splits =
      search::plan_stage_splits(p.model, p.cluster, p.found.best, r.train, r.time_limit_s);
  HEDDLE_TRY(splits);
  p.splits = std::move(*splits);
  return p;
}

Status export_planned(PlannedModel& p) {
  if (!p.target.export_to) return {};
  auto e = exporting::export_plan(*p.target.export_to, p.best_export);
  HEDDLE_TRY(e);
  p.exported = std::move(*e);
  return {};
}

Status write_plan_files(const PlannedModel& p) {
  const PlanModelRequest& a = p.request;
  const std::string& dir = a.out_dir;
  HEDDLE_TRY(make_dirs(dir));
  nlohmann::json plan =
      search::plan_file_json(p.found, p.model, a.model.source, p.cluster, a.train);
  exporting::add_target_json(plan, p.target, p.best_export);
  if (p.exported)
    HEDDLE_TRY(write_file_atomic(dir + "/" + p.exported->file_name, p.exported->text));
  HEDDLE_TRY(write_file_atomic(dir + "/plan.json", plan.dump(2) + "\n"));
  auto traced =
      search::plan_trace(p.model, p.cluster, p.found.best, a.train, a.overlap, a.time_limit_s);
  if (traced.ok()) HEDDLE_TRY(write_file_atomic(dir + "/trace.json", *traced));
  if (auto g = p.model.build(p.model.layers > 0 ? p.model.unit : 0, p.model.batch); g.ok())
    HEDDLE_TRY(write_file_atomic(dir + "/graph.dot", to_dot(*g)));
  return {};
}

nlohmann::json plan_report_json(const PlannedModel& p) {
  const search::ConfigSearch& found = p.found;
  const PlanModelRequest& a = p.request;
  nlohmann::json j = search::plan_json(found.best);
  j["search_time_s"] = found.search_time_s;
  j["evaluated"] = found.evaluated;
  j["proven_best"] = found.complete && found.ilp.optimal;
  j["objective"] = a.objective;
  j["fastest"] = search::plan_json(found.fastest);
  j["least_energy"] = search::plan_json(found.greenest);
  j["ilp_solves"] = found.ilp.solves;
  // The keys that explain the plan: its breakdown and workload, the ranking, the compared
  // strategies and the warnings.
  cost::add_step_json(j, found.best.sim, p.model, "stage_meshes");
  j["ranking"] = search::ranking_json(found.ranking);
  if (!a.compare.empty()) j["compare"] = search::compare_json(p.compared, found.best.sim);
  j["warnings"] = p.warnings;
  j["cluster"] = p.cluster.name;
  j["overlap"] = a.overlap;
  j["split_report"] = search::stage_splits_json(p.splits);
  exporting::add_target_json(j, p.target, p.best_export);
  if (p.exported) j["export"] = p.exported->text;
  return j;
}

std::string plan_report_text(const PlannedModel& p) {
  const cost::SimulationResult& r = p.found.best.sim;
  const PlanModelRequest& a = p.request;
  std::string out =
      fmt::format("plan       {} on {} ({} of {} devices){}\n", r.strategy, p.cluster.name,
                  r.devices, p.cluster.count, a.train ? ", training step" : "");
  out += fmt::format(
      "step time  {:.4g} s   MFU {:.1f}%   {:.1f} TFLOP/s per device (published count: {:.1f}%)\n",
      r.step_time_s, 100 * r.mfu, r.tflops_per_device, 100 * r.published_mfu);
  out += fmt::format("memory     {} peak per device of {} (runtime reserve {} in the peak)\n",
                     human_bytes(r.peak_memory_bytes), human_bytes(r.memory_limit_bytes),
                     human_bytes(p.target.reserve_bytes));
  out += cost::stage_memory_text(r);
  out += assumptions_text(p);
  out += pipeline_text(r, a.train);
  out += fmt::format("runs on    {}\n", exporting::runnable_text(p.best_export));
  out += stages_text(p);
  out += search_text(p.found);
  out += cost::breakdown_text(r);
  out += search::compare_text(p.compared, r);
  out += search::ranking_text(p.found.ranking);
  return out;
}

}  // namespace heddle::driver
