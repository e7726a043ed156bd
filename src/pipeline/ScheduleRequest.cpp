#include "heddle/pipeline/ScheduleRequest.h"

#include <fmt/format.h>

#include <chrono>

#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/PlacementJson.h"
#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/support/Limits.h"

namespace heddle::pipeline {

Result<BlockPlacement> resolve_placement(const std::string& name, int devices) {
  // A name without '/' or ".json" is a built-in (the error lists them); anything else a file.
  const bool file =
      name.find('/') != std::string::npos || (name.size() > 5 && name.ends_with(".json"));
  if (!is_builtin_placement(name) && file) return load_placement_file(name, devices);
  if (devices < 1)
    return Diagnostic(fmt::format(
        "--devices is required for the built-in placement '{}' (a positive device count)", name));
  if (devices > limits::kMaxScheduleDevices)
    return Diagnostic(fmt::format("--devices {} is more than the {} a schedule search handles",
                                  devices, limits::kMaxScheduleDevices));
  return builtin_placement(name, devices);
}

Result<MadeSchedule> make_schedule(const BlockPlacement& p, int micro_batches, double memory,
                                   const std::string& baseline, double time_limit_s) {
  HEDDLE_TRY(check_request(p, micro_batches, memory));
  MadeSchedule out;
  if (!baseline.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto b = build_baseline(baseline, p, micro_batches);
    HEDDLE_TRY(b);
    out.search_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.schedule = std::move(b->schedule);
    out.method = "baseline " + b->name;
    out.period = b->period;
    return out;
  }
  ScheduleSearchOptions opt;
  opt.time_limit_s = time_limit_s;
  auto r = search_schedule(p, micro_batches, memory, opt);
  HEDDLE_TRY(r);
  out.schedule = std::move(r->schedule);
  out.method = "searched (" + r->method + ")";
  out.period = r->period;
  out.search_time_s = r->search_time_s;
  return out;
}

}  // namespace heddle::pipeline
