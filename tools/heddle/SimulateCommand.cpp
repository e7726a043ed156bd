// `heddle simulate`: predicts one step of a model under a strategy on a cluster (step time, MFU,
// TFLOP/s per device, peak memory, bubble, bytes per link) and can write a Chrome trace.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "Command.h"
#include "heddle/cost/Simulator.h"
#include "heddle/cost/StepReport.h"
#include "heddle/ir/Verifier.h"
#include "heddle/search/ConfigSearch.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

struct SimulateArgs {
  std::string model, cluster, strategy, trace, stage_planner = "tactics", memory;
  zoo::ZooOverrides overrides;
  std::map<std::string, int64_t> dims;  ///< --dim: ONNX dynamic dims
  std::string loss;  ///< --loss: an ONNX model's training loss (default empty: auto)
  bool train = false, json = false, overlap = false, executor = false;
};

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

// Exit code 1 with advice when the plan does not fit (docs/cli.md: an infeasible request), else
// 0.
int infeasible(const cost::SimulationResult& r) {
  auto why = cost::infeasibility(r);
  return why ? user_error(*why) : 0;
}

int run_simulate(const SimulateArgs& a) {
  if (!a.trace.empty())
    if (auto st = check_writable_file(a.trace, "--trace"); !st.ok()) return user_error(st.error());
  auto cluster = cost::resolve_cluster(a.cluster);
  if (!cluster.ok()) return user_error(cluster.error());
  if (!a.memory.empty()) {
    auto m = parse_bytes(a.memory);
    if (!m.ok()) return user_error(m.error());
    cluster->for_each_device([&](cost::DeviceProfile& d) { d.memory_bytes = *m; });
  }
  report_note(LogLevel::kInfo, "cluster", "cluster " + cluster->name + ": " + cluster->source);
  auto spec = StrategySpec::parse(a.strategy);
  if (!spec.ok()) return user_error(spec.error());
  auto src = model::load_scalable_model(
      {.source = a.model, .overrides = a.overrides, .options = {}, .dims = a.dims, .loss = a.loss});
  if (!src.ok()) return user_error(src.error());
  cost::SimulateOptions opts;
  if (a.stage_planner == "ilp")  // the stages `heddle plan` re-planned with the intra-op ILP
    opts = search::intra_op_simulate_options(*src, *cluster, a.train, 60, nullptr);
  else if (a.stage_planner != "tactics")
    return user_error(Diagnostic("--stage-planner '" + a.stage_planner +
                                 "' is not a stage planner; use tactics or ilp"));
  opts.train = a.train;
  opts.overlap = a.overlap;
  opts.trace = !a.trace.empty();
  opts.autodiff = a.executor;
  opts.executor_io = a.executor;
  auto r = cost::simulate(*src, *cluster, *spec, opts);
  if (!r.ok()) return user_error(r.error());
  if (!a.trace.empty()) {
    if (auto st = write_file_atomic(a.trace, r->trace_json); !st.ok())
      return user_error(st.error());
  }
  if (a.json) {
    const nlohmann::json j = cost::simulation_json(*r, *src);
    std::printf("%s\n", j.dump(2).c_str());
    return infeasible(*r);
  }
  std::string out;
  out += fmt::format("model            {} ({}, {} devices)\n", a.model,
                     a.train ? "training step" : "forward", r->devices);
  out += fmt::format("strategy         {}\n", r->strategy);
  out += fmt::format("workload         {}\n", cost::workload_text(*r, *src));
  out += fmt::format("micro-batches    {}\n", cost::micro_batches_text(*r));
  out += fmt::format("step time        {:.6g} s\n", r->step_time_s);
  out += fmt::format("TFLOP/s/device   {:.1f} (MFU {:.1f}%)\n", r->tflops_per_device, 100 * r->mfu);
  out += fmt::format("bubble fraction  {:.2f}%\n", 100 * r->bubble_fraction);
  const bool device_fits = r->peak_memory_bytes <= r->memory_limit_bytes;
  out += fmt::format("peak memory      {} of {}{}\n", gib(r->peak_memory_bytes),
                     gib(r->memory_limit_bytes), device_fits ? "" : " (does not fit)");
  if (r->host_memory_bytes > 0)
    out += fmt::format("host memory      {} of {}{}\n", gib(r->host_memory_bytes),
                       gib(r->host_memory_limit_bytes), r->feasible ? "" : " (does not fit)");
  if (r->nvme_bytes > 0)
    out += fmt::format("nvme             {} of {}\n", gib(r->nvme_bytes), gib(r->nvme_limit_bytes));
  out += fmt::format("comm per device  {}\n", gib(r->comm_bytes));
  for (const auto& [link, bytes] : r->link_bytes)
    out += fmt::format("  {:<14} {}\n", link, gib(bytes));
  out += cost::breakdown_text(*r);
  out +=
      "stage  layers   busy s    idle s   states     buffers    activations  allocator  "
      "peak        in flight  mesh\n";
  for (size_t i = 0; i < r->stages.size(); ++i) {
    const auto& s = r->stages[i];
    out += fmt::format(
        "{:>5}  {:>6}  {:>8.4g}  {:>8.4g}  {:>10}  {:>9}  {:>11}  {:>9}  {:>10}  {:>9}  dp {} x "
        "{}tp {}{}\n",
        i, s.layers, s.busy_s, s.idle_s, gib(s.state_bytes), gib(s.buffer_bytes),
        gib(s.activation_bytes), gib(s.allocator_bytes), gib(s.peak_memory_bytes), s.in_flight,
        s.dp, r->cp > 1 ? fmt::format("cp {} x ", r->cp) : "", s.tp,
        cluster->mixed() ? " on " + s.device : "");
  }
  std::fputs(out.c_str(), stdout);
  return infeasible(*r);
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto args = std::make_shared<SimulateArgs>();
  auto* app = root.add_subcommand(
      "simulate",
      "Predict one step of MODEL under a strategy on a cluster: step time, MFU, TFLOP/s per "
      "device, peak memory, bubble fraction, bytes per link.");
  app->add_option("MODEL", args->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  app->add_option("--cluster", args->cluster,
                  "<device>x<count> (v100, a100-40gb, a100-80gb, a100, h100, h200), cpu, or a "
                  "JSON cluster file")
      ->required();
  app->add_option(
         "--strategy", args->strategy,
         "dp=..,tp=..,pp=..,zero=..,mb=..,schedule=..,recompute=..,sp=on,layers=a/b/.., or "
         "pp=..,meshes=DPxTP/DPxTP/..,microbatches=.. (per-stage sub-meshes)")
      ->required();
  add_zoo_overrides(app, args->overrides);
  add_dim_option(app, args->dims);
  add_loss_option(app, args->loss);
  app->add_flag("--train", args->train, "Simulate a training step (default: forward only)");
  app->add_option("--memory", args->memory,
                  "Memory per device, e.g. 40GiB (default: the device's); the step is "
                  "infeasible (exit 1) when its peak exceeds it");
  app->add_flag("--overlap", args->overlap,
                "Overlap gradient reduction and stage sends with compute");
  app->add_flag("--executor", args->executor,
                "Predict heddle's own executor (`heddle run`): training steps costed from the "
                "autodiff graph, plus loading the feeds and gathering the outputs");
  app->add_option("--trace", args->trace, "Write a Chrome trace (Perfetto) JSON file");
  app->add_option("--stage-planner", args->stage_planner,
                  "tactics (default: propagation from the strategy) or ilp (the intra-op ILP, "
                  "as heddle plan may choose)");
  app->add_flag("--json", args->json, "Print one JSON object instead of text");
  return {app, [args] { return run_simulate(*args); }};
}

}  // namespace heddle::cli
