// `heddle schedule`: search (or build a baseline) pipeline schedule for a placement and print its
// timeline and figures, or one JSON object with --json; --trace writes a Chrome trace.
#include <fmt/format.h>

#include <memory>

#include "Command.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/ChromeTrace.h"
#include "heddle/pipeline/ScheduleReport.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

namespace pl = heddle::pipeline;

struct ScheduleArgs {
  std::string placement;
  int devices = 0;
  int micro_batches = 0;
  double memory = 0;
  std::string baseline;
  std::string trace;
  bool json = false;
  double time_limit = 10.0;
  int max_cells = 400;
};

int run_schedule(const ScheduleArgs& a) {
  if (!a.trace.empty())
    if (auto st = check_writable_file(a.trace, "--trace"); !st.ok()) return user_error(st.error());
  auto placement = pl::resolve_placement(a.placement, a.devices);
  if (!placement.ok()) return user_error(placement.error());
  auto made = pl::make_schedule(*placement, a.micro_batches, a.memory, a.baseline, a.time_limit);
  if (!made.ok()) return user_error(made.error());
  const pl::ScheduleReport r =
      pl::report_schedule(*placement, std::move(*made), a.micro_batches, a.memory, a.max_cells);
  if (!r.valid.ok()) report_note(LogLevel::kWarn, "warning", pl::invalid_warning(r));
  if (!a.trace.empty())
    if (auto st =
            write_file_atomic(a.trace, pl::chrome_trace_json(*placement, r.made.schedule) + "\n");
        !st.ok())
      return user_error(st.error());
  fmt::print("{}", a.json ? pl::to_json(r) + "\n" : pl::to_string(r));
  return 0;
}

}  // namespace

Command add_schedule_command(CLI::App& root) {
  auto args = std::make_shared<ScheduleArgs>();
  auto* app = root.add_subcommand(
      "schedule",
      "Search a pipeline schedule for a placement (or build a baseline) and print its "
      "timeline, makespan, period, bubble fraction, peak memory and lower bound.");
  app->add_option("--placement", args->placement,
                  "vshape, interleaved:V, vshape-zb, xshape, mshape, kshape, nnshape, or a JSON "
                  "placement file")
      ->required();
  app->add_option("--devices", args->devices, "Number of devices (required for built-ins)");
  app->add_option("--micro-batches", args->micro_batches, "Number of micro-batches")->required();
  app->add_option("--memory", args->memory, "Memory limit per device (units of block memory)")
      ->required();
  app->add_option("--baseline", args->baseline,
                  "Print this baseline instead of searching: " + join(pl::baseline_names(), ", "));
  app->add_option("--trace", args->trace, "Write a Chrome trace (Perfetto) JSON file");
  app->add_flag("--json", args->json, "Print one JSON object instead of text");
  app->add_option("--time-limit", args->time_limit, "Search time limit in seconds (default 10)");
  app->add_option("--max-cells", args->max_cells,
                  "Timeline cells shown per device, 0 for all (default 400)");
  return {app, [args] { return run_schedule(*args); }};
}

}  // namespace heddle::cli
