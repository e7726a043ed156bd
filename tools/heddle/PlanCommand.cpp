// `heddle plan`: the fastest plan that fits. Searches parallel layouts, micro-batch sizes,
// pipeline schedules, ZeRO stages and recomputation with the simulator; prints the winner, its
// predicted step time, MFU and memory, the runners-up, and writes plan.json, trace.json and
// graph.dot with --out.
#include <fmt/format.h>
#include <unistd.h>

#include <functional>
#include <memory>

#include "Command.h"
#include "heddle/driver/PlanModel.h"
#include "heddle/support/Log.h"

namespace heddle::cli {

namespace {

struct PlanArgs {
  driver::PlanModelRequest request;
  bool json = false;
};

// The search's progress on stderr: a bar redrawn in place on a terminal; into a log or pipe, one
// line per quarter of the search; with --json, an info record per quarter, so stderr stays JSON
// lines (docs/cli.md, "Logging").
std::function<void(int64_t, int64_t)> progress_printer(bool tty, bool json) {
  return [last = -1, tty, json](int64_t done, int64_t total) mutable {
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
}

int run_plan(PlanArgs& a) {
  const bool tty = isatty(STDERR_FILENO) != 0 && !a.json;
  bool drawn = false;  // the bar ends its line once the search is over
  a.request.progress = [&drawn, print = progress_printer(tty, a.json)](int64_t d,
                                                                       int64_t t) mutable {
    drawn = true;
    print(d, t);
  };
  auto planned = driver::plan_model(a.request);
  if (tty && drawn) std::fprintf(stderr, "\n");
  if (!planned.ok()) return user_error(planned.error());
  if (a.json)  // the text restates them on stdout
    for (const auto& w : planned->warnings)
      report_note(LogLevel::kWarn, "warning", "warning: " + w);
  if (auto st = driver::export_planned(*planned); !st.ok()) return user_error(st.error());
  if (!a.request.out_dir.empty())
    if (auto st = driver::write_plan_files(*planned); !st.ok()) return user_error(st.error());
  if (a.json) {
    fmt::print("{}\n", driver::plan_report_json(*planned).dump(2));
  } else if (const auto& exported = planned->exported) {
    // stdout holds the export alone: `heddle plan ... --export deepspeed > ds.json`
    for (const auto& n : exported->notes) report_note(LogLevel::kWarn, "note", "note: " + n);
    fmt::print("{}", exported->text);
  } else {
    fmt::print("{}", driver::plan_report_text(*planned));
  }
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
                  "Memory per device for the CUDA context, NCCL and cuBLAS buffers: replaces the "
                  "allocator allowance's fixed part (default: the device's, 2GB on GPUs; 0: none; "
                  "5% fragmentation is charged either way)");
}

}  // namespace

Command add_plan_command(CLI::App& root) {
  auto args = std::make_shared<PlanArgs>();
  driver::PlanModelRequest* a = &args->request;
  auto* app = root.add_subcommand(
      "plan",
      "Find the fastest plan that fits: parallel degrees, micro-batches, schedule, ZeRO "
      "and recomputation, each simulated on the cluster.");
  app->add_option("MODEL", a->model.source,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  app->add_option("--cluster", a->cluster, "a100x64, h100x1024, v100x32, cpu, or a JSON file")
      ->required();
  app->add_option("--memory", a->memory, "Memory per device, e.g. 40GiB (default: the device's)");
  app->add_option("--strategy", a->strategy, "auto (default), or pins: auto,pp=8 / auto,tp=8");
  app->add_flag("--train", a->train, "Plan a training step (forward, backward, optimizer)");
  app->add_option("--time-limit", a->time_limit_s, "Search time limit in seconds (default 60)");
  app->add_option("--objective", a->objective, "time (default: fastest step) or energy (per step)");
  app->add_option("--max-devices", a->max_devices,
                  "Plans may use up to N of the cluster's devices (powers of two and N)");
  app->add_option("--target-step-time", a->target_step_time_s,
                  "The smallest device count whose plan reaches this step time (seconds)");
  app->add_option("--out", a->out_dir, "Write plan.json, trace.json and graph.dot to DIR");
  app->add_flag("--json", args->json, "Print one JSON object");
  app->add_option("--compare", a->compare,
                  "A strategy of yours (dp=..,tp=..,pp=..,...) priced beside the plan, with the "
                  "step breakdown that explains the gap (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_flag("--overlap", a->overlap,
                "Overlap gradient reduction and stage sends with compute (as simulate --overlap)");
  add_target_flags(app, a->target);
  add_zoo_overrides(app, a->model.overrides);
  add_dim_option(app, a->model.dims);
  add_loss_option(app, a->model.loss);
  return {app, [args] { return run_plan(*args); }};
}

}  // namespace heddle::cli
