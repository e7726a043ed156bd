// `heddle plan`: the fastest plan that fits. Searches parallel layouts, micro-batch sizes,
// pipeline schedules, ZeRO stages and recomputation with the simulator; prints the winner, its
// predicted step time, MFU and memory, the runners-up, and writes plan.json, trace.json and
// graph.dot with --out.
#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "Command.h"
#include "heddle/cost/StepReport.h"
#include "heddle/export/PlanTarget.h"
#include "heddle/ir/DotExport.h"
#include "heddle/search/PlanReport.h"
#include "heddle/search/PlanRequest.h"
#include "heddle/search/PlanSplit.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Log.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

struct PlanArgs {
  std::string model, cluster, strategy = "auto", memory, out_dir;
  zoo::ZooOverrides overrides;
  std::map<std::string, int64_t> dims;  ///< --dim: ONNX dynamic dims
  std::string loss;  ///< --loss: an ONNX model's training loss (default empty: auto)
  bool train = false, json = false, overlap = false;
  std::vector<std::string> compare;  ///< --compare: the user's strategies, priced beside the plan
  double time_limit = 60, target_step_time = 0;
  std::string objective = "time";
  int64_t max_devices = 0;
  exporting::TargetFlags target;  ///< --target, --export, --memory-reserve
};

// What the plan assumes, restated: the workload, micro-batches, cluster and memory limit, and
// the warnings about defaults.
std::string assumptions_text(const cost::SimulationResult& r, const model::ScalableModel& src,
                             const cost::Cluster& cluster, const PlanArgs& a) {
  std::string out = fmt::format("workload   {}\n", cost::workload_text(r, src));
  out += fmt::format("batches    {}\n", cost::micro_batches_text(r));
  out += fmt::format("assumes    {} per device{}, cluster {} ({}){}\n",
                     human_bytes(r.memory_limit_bytes), a.memory.empty() ? " (the device's)" : "",
                     cluster.name, cluster.source,
                     a.overlap ? ", overlap=dp+tp unless the strategy says otherwise"
                               : ", the strategy's overlap= or the device's default overlap");
  for (const auto& w :
       cost::workload_warnings(src, a.overrides.batch.has_value(), r.devices, a.train))
    out += fmt::format("warning    {}\n", w);
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

// How much the search did: the space's size and the simulations, refinements included.
std::string search_text(const search::ConfigSearch& found, const std::string& caveat) {
  return fmt::format(
      "search     {} configurations in the space (dominated ones skipped), {} simulations "
      "including refinements (ILP stage plans, layer splits, sub-meshes), {} intra-op ILPs, in "
      "{:.2f} s{}\n",
      found.candidates, found.evaluated, found.ilp.solves, found.search_time_s, caveat);
}

// The JSON keys that explain the plan: its breakdown and workload, the ranking, the compared
// strategies and the warnings.
void add_explain_json(nlohmann::json& j, const search::ConfigSearch& found,
                      const model::ScalableModel& src, const cost::Cluster& cluster,
                      const PlanArgs& a, const std::vector<search::ComparedPlan>& compared,
                      const std::vector<std::string>& warnings) {
  cost::add_step_json(j, found.best.sim, src, "stage_meshes");
  j["ranking"] = search::ranking_json(found.ranking);
  if (!a.compare.empty()) j["compare"] = search::compare_json(compared, found.best.sim);
  j["warnings"] = warnings;
  j["cluster"] = cluster.name;
  j["overlap"] = a.overlap;
}

int run_plan(const PlanArgs& a) {
  // The output directory before the search: a long search must not end in "cannot write".
  if (!a.out_dir.empty())
    if (auto st = check_writable_dir(a.out_dir, "--out"); !st.ok()) return user_error(st.error());
  auto cluster = cost::resolve_cluster(a.cluster);
  if (!cluster.ok()) return user_error(cluster.error());
  if (!a.memory.empty()) {
    auto m = parse_bytes(a.memory);
    if (!m.ok()) return user_error(m.error());
    cluster->for_each_device([&](cost::DeviceProfile& d) { d.memory_bytes = *m; });
  }
  auto spec = StrategySpec::parse(a.strategy);
  if (!spec.ok()) return user_error(Diagnostic("--strategy: " + spec.error().message));
  auto src = model::load_scalable_model(
      {.source = a.model, .overrides = a.overrides, .options = {}, .dims = a.dims, .loss = a.loss});
  if (!src.ok()) return user_error(src.error());
  auto o = search::plan_search_options({.objective = a.objective,
                                        .max_devices = a.max_devices,
                                        .target_step_time_s = a.target_step_time,
                                        .time_limit_s = a.time_limit,
                                        .train = a.train,
                                        .overlap = a.overlap,
                                        .pins = *spec},
                                       *cluster);
  if (!o.ok()) return user_error(o.error());
  auto target = exporting::apply_target_flags(a.target, *cluster, *o);
  if (!target.ok()) return user_error(target.error());
  // A bar redrawn in place on a terminal; into a log or pipe, one line per quarter of the search;
  // with --json, an info record per quarter, so stderr stays JSON lines (docs/cli.md, "Logging").
  const bool tty = isatty(STDERR_FILENO) != 0 && !a.json;
  o->progress = [last = -1, tty, json = a.json](int64_t done, int64_t total) mutable {
    const int width = tty ? 30 : 4;
    int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    if (filled == last && done != total) return;  // redraw only when the bar moves
    last = filled;
    if (json)
      log(LogLevel::kInfo, "progress",
          fmt::format("searching: {} of {} configurations", done, total),
          {{"done", static_cast<double>(done)}, {"total", static_cast<double>(total)}});
    else if (tty)
      std::fprintf(stderr, "\rsearching [%s%s] %ld/%ld", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<long>(done),
                   static_cast<long>(total));
    else
      std::fprintf(stderr, "searching: %ld of %ld configurations\n", static_cast<long>(done),
                   static_cast<long>(total));
  };
  auto found = search::search_configs(*src, *cluster, *o);
  if (tty) std::fprintf(stderr, "\n");
  if (!found.ok() && target->target != exporting::Target::kAny)
    return user_error(Diagnostic(found.error().message + " (--target " +
                                 exporting::to_string(target->target) +
                                 ": only strategies it runs were tried)"));
  if (!found.ok()) return user_error(found.error());
  const auto& best = found->best;
  auto compared = search::price_compared(a.compare, *src, *cluster, a.train, a.overlap);
  if (!compared.ok()) return user_error(compared.error());
  const auto warnings =
      cost::workload_warnings(*src, a.overrides.batch.has_value(), best.sim.devices, a.train);
  if (a.json)  // the text restates them on stdout
    for (const auto& w : warnings) report_note(LogLevel::kWarn, "warning", "warning: " + w);
  const auto best_export = exporting::export_plan_of(*src, *cluster, best, a.train);
  auto splits = search::plan_stage_splits(*src, *cluster, best, a.train, a.time_limit);
  if (!splits.ok()) return user_error(splits.error());
  std::optional<exporting::Export> exported;
  if (target->export_to) {
    auto e = exporting::export_plan(*target->export_to, best_export);
    if (!e.ok()) return user_error(e.error());
    exported = std::move(*e);
  }
  if (!a.out_dir.empty()) {
    if (auto st = make_dirs(a.out_dir); !st.ok()) return user_error(st.error());
    nlohmann::json plan = search::plan_file_json(*found, *src, a.model, *cluster, a.train);
    exporting::add_target_json(plan, *target, best_export);
    if (exported)
      if (auto st = write_file_atomic(a.out_dir + "/" + exported->file_name, exported->text);
          !st.ok())
        return user_error(st.error());
    if (auto st = write_file_atomic(a.out_dir + "/plan.json", plan.dump(2) + "\n"); !st.ok())
      return user_error(st.error());
    auto traced = search::plan_trace(*src, *cluster, best, a.train, a.overlap, a.time_limit);
    if (traced.ok())
      if (auto st = write_file_atomic(a.out_dir + "/trace.json", *traced); !st.ok())
        return user_error(st.error());
    if (auto g = src->build(src->layers > 0 ? src->unit : 0, src->batch); g.ok())
      if (auto st = write_file_atomic(a.out_dir + "/graph.dot", to_dot(*g)); !st.ok())
        return user_error(st.error());
  }
  if (a.json) {
    nlohmann::json j = search::plan_json(best);
    j["search_time_s"] = found->search_time_s;
    j["evaluated"] = found->evaluated;
    j["proven_best"] = found->complete && found->ilp.optimal;
    j["objective"] = a.objective;
    j["fastest"] = search::plan_json(found->fastest);
    j["least_energy"] = search::plan_json(found->greenest);
    j["ilp_solves"] = found->ilp.solves;
    add_explain_json(j, *found, *src, *cluster, a, *compared, warnings);
    j["split_report"] = search::stage_splits_json(*splits);
    exporting::add_target_json(j, *target, best_export);
    if (exported) j["export"] = exported->text;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  if (exported) {  // stdout holds the export alone: `heddle plan ... --export deepspeed > ds.json`
    for (const auto& n : exported->notes) report_note(LogLevel::kWarn, "note", "note: " + n);
    fmt::print("{}", exported->text);
    return 0;
  }
  const auto& r = best.sim;
  fmt::print("plan       {} on {} ({} of {} devices){}\n", r.strategy, cluster->name, r.devices,
             cluster->count, a.train ? ", training step" : "");
  fmt::print("step time  {:.4g} s   MFU {:.1f}%   {:.1f} TFLOP/s per device\n", r.step_time_s,
             100 * r.mfu, r.tflops_per_device);
  fmt::print("memory     {} peak per device of {} ({} reserved)\n",
             human_bytes(r.peak_memory_bytes), human_bytes(r.memory_limit_bytes),
             human_bytes(target->reserve_bytes));
  fmt::print("{}", assumptions_text(r, *src, *cluster, a));
  fmt::print("{}", pipeline_text(r, a.train));
  fmt::print("runs on    {}\n", exporting::runnable_text(best_export));
  if (r.heterogeneous || cluster->mixed()) {
    std::vector<std::string> ms;
    for (const auto& s : r.stages)
      ms.push_back(fmt::format("dp {} x tp {} ({} layers, mb {}){}", s.dp, s.tp, s.layers,
                               s.micro_batch, cluster->mixed() ? " on " + s.device : ""));
    fmt::print("sub-meshes {}\n", join(ms, " | "));
  }
  if (best.stage_planner == "tactics")
    fmt::print("stages     sharded by the tactics (Megatron-style propagation)\n");
  else
    fmt::print(
        "stages     sharded by the intra-op ILP (beat the tactics); reproduce with heddle "
        "simulate ... --strategy {} --stage-planner ilp\n",
        r.strategy);
  if (auto t = search::stage_splits_text(*splits); !t.empty()) fmt::print("not split  {}", t);
  if (r.energy_j > 0) {
    // How the objectives trade off: the chosen plan against the fastest and the least-energy one.
    const auto& f = found->fastest.sim;
    const auto& e = found->greenest.sim;
    fmt::print("energy     {:.4g} kJ per step ({:.0f} W average over {} devices)\n",
               r.energy_j / 1e3, r.energy_j / r.step_time_s, r.devices);
    fmt::print(
        "trade-off  objective {}: fastest plan {:.4g} s, {:.4g} kJ ({} devices); "
        "least energy {:.4g} s, {:.4g} kJ ({} devices)\n",
        a.objective, f.step_time_s, f.energy_j / 1e3, f.devices, e.step_time_s, e.energy_j / 1e3,
        e.devices);
  }
  if (a.target_step_time > 0)
    fmt::print("target     {:.4g} s per step: {} devices is the smallest count reaching it\n",
               a.target_step_time, r.devices);
  std::string caveat;
  if (!found->complete)
    caveat = " (time limit reached: best found, not proven best)";
  else if (!found->ilp.optimal)
    caveat = " (an ILP hit its time limit: not proven optimal)";
  fmt::print("{}", search_text(*found, caveat));
  fmt::print("{}", cost::breakdown_text(r));
  fmt::print("{}", search::compare_text(*compared, r));
  fmt::print("{}", search::ranking_text(found->ranking));
  return 0;
}

// --target, --export and --memory-reserve (what they mean: heddle/export/PlanTarget.h).
void add_target_flags(CLI::App* app, exporting::TargetFlags& flags) {
  app->add_option("--target", flags.target,
                  "Only plans this stack can run: megatron, torchtitan, deepspeed, heddle or any "
                  "(default: the --export format, else any)");
  app->add_option("--export", flags.export_format,
                  "Print the plan as megatron arguments, a torchtitan TOML or a deepspeed JSON "
                  "(also written to --out DIR)");
  app->add_option("--memory-reserve", flags.memory_reserve,
                  "Memory per device left free for the CUDA context, NCCL buffers and "
                  "fragmentation (default: 5% of it, at least 2GiB, at most a quarter; 0: none)");
}

}  // namespace

Command add_plan_command(CLI::App& root) {
  auto a = std::make_shared<PlanArgs>();
  auto* app = root.add_subcommand(
      "plan",
      "Find the fastest plan that fits: parallel degrees, micro-batches, schedule, ZeRO "
      "and recomputation, each simulated on the cluster.");
  app->add_option("MODEL", a->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  app->add_option("--cluster", a->cluster, "a100x64, h100x1024, v100x32, cpu, or a JSON file")
      ->required();
  app->add_option("--memory", a->memory, "Memory per device, e.g. 40GiB (default: the device's)");
  app->add_option("--strategy", a->strategy, "auto (default), or pins: auto,pp=8 / auto,tp=8");
  app->add_flag("--train", a->train, "Plan a training step (forward, backward, optimizer)");
  app->add_option("--time-limit", a->time_limit, "Search time limit in seconds (default 60)");
  app->add_option("--objective", a->objective, "time (default: fastest step) or energy (per step)");
  app->add_option("--max-devices", a->max_devices,
                  "Plans may use up to N of the cluster's devices (powers of two and N)");
  app->add_option("--target-step-time", a->target_step_time,
                  "The smallest device count whose plan reaches this step time (seconds)");
  app->add_option("--out", a->out_dir, "Write plan.json, trace.json and graph.dot to DIR");
  app->add_flag("--json", a->json, "Print one JSON object");
  app->add_option("--compare", a->compare,
                  "A strategy of yours (dp=..,tp=..,pp=..,...) priced beside the plan, with the "
                  "step breakdown that explains the gap (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_flag("--overlap", a->overlap,
                "Overlap gradient reduction and stage sends with compute (as simulate --overlap)");
  add_target_flags(app, a->target);
  add_zoo_overrides(app, a->overrides);
  add_dim_option(app, a->dims);
  add_loss_option(app, a->loss);
  return {app, [a] { return run_plan(*a); }};
}

}  // namespace heddle::cli
