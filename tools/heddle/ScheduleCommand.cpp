// `heddle schedule`: search (or build a baseline) pipeline schedule for a placement and print its
// timeline and figures, or one JSON object with --json; --trace writes a Chrome trace.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "Command.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/ChromeTrace.h"
#include "heddle/pipeline/ScheduleRequest.h"
#include "heddle/pipeline/Timeline.h"
#include "heddle/pipeline/Validate.h"
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

std::string num(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)))
    return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{:.6g}", v);
}

int run_schedule(const ScheduleArgs& a) {
  if (!a.trace.empty())
    if (auto st = check_writable_file(a.trace, "--trace"); !st.ok()) return user_error(st.error());
  auto placement = pl::resolve_placement(a.placement, a.devices);
  if (!placement.ok()) return user_error(placement.error());
  const pl::Placement& p = *placement;
  auto made = pl::make_schedule(p, a.micro_batches, a.memory, a.baseline, a.time_limit);
  if (!made.ok()) return user_error(made.error());
  const pl::Schedule& schedule = made->schedule;
  const std::string& method = made->method;
  const double period = made->period, search_time = made->search_time_s;
  auto valid = pl::validate_schedule(p, schedule, a.memory);
  if (!valid.ok()) {
    report_note(LogLevel::kWarn, "warning",
                "warning: the " + method + " schedule is not valid under --memory " +
                    num(a.memory) + ": " + valid.error().message);
  }
  auto stats = pl::compute_stats(p, schedule);
  const double lb = pl::makespan_lower_bound(p, a.micro_batches);

  if (!a.trace.empty()) {
    if (auto st = write_file_atomic(a.trace, pl::chrome_trace_json(p, schedule) + "\n"); !st.ok())
      return user_error(st.error());
  }
  if (a.json) {
    nlohmann::json j = {{"makespan", stats.makespan},
                        {"period", period},
                        {"bubble_fraction", stats.bubble_fraction},
                        {"peak_memory", stats.peak_memory},
                        {"lower_bound", lb},
                        {"search_time_s", search_time},
                        {"valid", valid.ok()},
                        {"method", method},
                        {"placement", p.name},
                        {"devices", p.num_devices},
                        {"micro_batches", a.micro_batches},
                        {"memory_limit", a.memory}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::vector<std::string> peaks;
  for (double v : stats.peak_memory) peaks.push_back(num(v));
  std::string out = fmt::format("placement {}: {} devices, {} micro-batches, memory limit {}\n",
                                p.name, p.num_devices, a.micro_batches, num(a.memory));
  out += fmt::format("schedule: {}\n", method);
  out += pl::render_timeline(p, schedule, a.max_cells);
  out += fmt::format("makespan         {}\n", num(stats.makespan));
  out += fmt::format("period           {}\n", num(period));
  out += fmt::format("bubble fraction  {:.4f}\n", stats.bubble_fraction);
  out += fmt::format("peak memory      {}\n", join(peaks, " "));
  out += fmt::format("lower bound      {} (makespan is {:.2f}% above)\n", num(lb),
                     lb > 0 ? 100.0 * (stats.makespan - lb) / lb : 0.0);
  out += fmt::format("search time      {:.4f} s\n", search_time);
  out += fmt::format("valid            {}\n", valid.ok() ? "yes" : "no");
  std::fputs(out.c_str(), stdout);
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
