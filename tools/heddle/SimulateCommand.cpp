// `heddle simulate`: predicts one step of a model under a strategy on a cluster (step time, MFU,
// TFLOP/s per device, peak memory, bubble, bytes per link) and can write a Chrome trace.
#include <fmt/format.h>

#include <memory>

#include "Command.h"
#include "heddle/cost/StepReport.h"
#include "heddle/driver/SimulateModel.h"
#include "heddle/support/AtomicFile.h"

namespace heddle::cli {

namespace {

struct SimulateArgs {
  driver::SimulateModelRequest request;
  std::string cluster, memory, trace;
  bool json = false;
};

int run_simulate(SimulateArgs& a) {
  if (!a.trace.empty())
    if (auto st = check_writable_file(a.trace, "--trace"); !st.ok()) return user_error(st.error());
  auto cluster = driver::resolve_cluster(a.cluster, a.memory);
  if (!cluster.ok()) return user_error(cluster.error());
  report_note(LogLevel::kInfo, "cluster", "cluster " + cluster->name + ": " + cluster->source);
  a.request.trace = !a.trace.empty();
  auto sim = driver::simulate_model(a.request, *cluster);
  if (!sim.ok()) return user_error(sim.error());
  const cost::SimulationResult& r = sim->result();
  if (!a.trace.empty())
    if (auto st = write_file_atomic(a.trace, r.trace_json); !st.ok()) return user_error(st.error());
  if (a.json)
    fmt::print("{}\n", driver::simulate_report_json(*sim).dump(2));
  else
    fmt::print("{}", cost::simulation_text(r, sim->model, a.request.model.source, a.request.train,
                                           cluster->mixed()));
  // Exit code 1 with advice when the plan does not fit (docs/cli.md: an infeasible request).
  auto why = cost::infeasibility(r);
  return why ? user_error(*why) : 0;
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto args = std::make_shared<SimulateArgs>();
  driver::SimulateModelRequest* r = &args->request;
  auto* app = root.add_subcommand(
      "simulate",
      "Predict one step of MODEL under a strategy on a cluster: step time, MFU, TFLOP/s per "
      "device, peak memory, bubble fraction, bytes per link.");
  app->add_option("MODEL", r->model.source,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  app->add_option("--cluster", args->cluster,
                  "<device>x<count> (v100, a100-40gb, a100-80gb, a100, h100, h200), cpu, or a "
                  "JSON cluster file")
      ->required();
  app->add_option(
         "--strategy", r->strategy,
         "dp=..,tp=..,pp=..,zero=..,mb=..,schedule=..,recompute=..,sp=on,layers=a/b/.., or "
         "pp=..,meshes=DPxTP/DPxTP/..,microbatches=.. (per-stage sub-meshes)")
      ->required();
  add_zoo_overrides(app, r->model.overrides);
  add_dim_option(app, r->model.dims);
  add_loss_option(app, r->model.loss);
  app->add_flag("--train", r->train, "Simulate a training step (default: forward only)");
  app->add_option("--memory", args->memory,
                  "Memory per device, e.g. 40GiB (default: the device's); the step is "
                  "infeasible (exit 1) when its peak exceeds it");
  app->add_flag("--overlap", r->overlap, "Overlap gradient reduction and stage sends with compute");
  app->add_flag("--executor", r->executor,
                "Predict heddle's own executor (`heddle run`): training steps costed from the "
                "autodiff graph, plus loading the feeds and gathering the outputs");
  app->add_option("--trace", args->trace, "Write a Chrome trace (Perfetto) JSON file");
  app->add_option("--stage-planner", r->stage_planner,
                  "tactics (default: propagation from the strategy) or ilp (the intra-op ILP, "
                  "as heddle plan may choose)");
  app->add_flag("--json", args->json, "Print one JSON object instead of text");
  return {app, [args] { return run_simulate(*args); }};
}

}  // namespace heddle::cli
