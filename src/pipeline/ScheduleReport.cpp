// What `heddle schedule` reports (heddle/pipeline/ScheduleReport.h).
#include "heddle/pipeline/ScheduleReport.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "heddle/pipeline/Timeline.h"
#include "heddle/pipeline/Validate.h"
#include "heddle/support/Strings.h"

namespace heddle::pipeline {

namespace {

// Whole numbers without a fraction, others with 6 significant digits.
std::string num(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)))
    return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{:.6g}", v);
}

}  // namespace

ScheduleReport report_schedule(const BlockPlacement& p, MadeSchedule made, int micro_batches,
                               double memory, int max_cells) {
  ScheduleReport r;
  r.placement = p.name;
  r.devices = p.num_devices;
  r.micro_batches = micro_batches;
  r.memory_limit = memory;
  r.valid = validate_schedule(p, made.schedule, memory);
  r.stats = compute_stats(p, made.schedule);
  r.lower_bound = makespan_lower_bound(p, micro_batches);
  r.timeline = render_timeline(p, made.schedule, max_cells);
  r.made = std::move(made);
  return r;
}

std::string invalid_warning(const ScheduleReport& r) {
  if (r.valid.ok()) return "";
  return "warning: the " + r.made.method + " schedule is not valid under --memory " +
         num(r.memory_limit) + ": " + r.valid.error().message;
}

std::string to_string(const ScheduleReport& r) {
  std::vector<std::string> peaks;
  for (double v : r.stats.peak_memory) peaks.push_back(num(v));
  const double lb = r.lower_bound;
  std::string out = fmt::format("placement {}: {} devices, {} micro-batches, memory limit {}\n",
                                r.placement, r.devices, r.micro_batches, num(r.memory_limit));
  out += fmt::format("schedule: {}\n", r.made.method);
  out += r.timeline;
  out += fmt::format("makespan         {}\n", num(r.stats.makespan));
  out += fmt::format("period           {}\n", num(r.made.period));
  out += fmt::format("bubble fraction  {:.4f}\n", r.stats.bubble_fraction);
  out += fmt::format("peak memory      {}\n", join(peaks, " "));
  out += fmt::format("lower bound      {} (makespan is {:.2f}% above)\n", num(lb),
                     lb > 0 ? 100.0 * (r.stats.makespan - lb) / lb : 0.0);
  out += fmt::format("search time      {:.4f} s\n", r.made.search_time_s);
  out += fmt::format("valid            {}\n", r.valid.ok() ? "yes" : "no");
  return out;
}

std::string to_json(const ScheduleReport& r) {
  const nlohmann::json j = {{"makespan", r.stats.makespan},
                            {"period", r.made.period},
                            {"bubble_fraction", r.stats.bubble_fraction},
                            {"peak_memory", r.stats.peak_memory},
                            {"lower_bound", r.lower_bound},
                            {"search_time_s", r.made.search_time_s},
                            {"valid", r.valid.ok()},
                            {"method", r.made.method},
                            {"placement", r.placement},
                            {"devices", r.devices},
                            {"micro_batches", r.micro_batches},
                            {"memory_limit", r.memory_limit}};
  return j.dump();
}

}  // namespace heddle::pipeline
