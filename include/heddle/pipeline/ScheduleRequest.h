// What `heddle schedule` (and any front end) asks of the pipeline library: a placement named by a
// built-in or a JSON file, and a schedule for it made by a named baseline or by the search.
#pragma once

#include <string>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"
#include "heddle/support/Result.h"

namespace heddle::pipeline {

/// The placement `name` names for `devices` devices: a JSON placement file when it contains '/'
/// or ends with `.json` (and is no built-in name), else a built-in, which needs 1 <= devices <=
/// limits::kMaxScheduleDevices. Diagnostics name `--devices` and the bound, or the file's error
/// (an unknown built-in lists the known ones).
Result<BlockPlacement> resolve_placement(const std::string& name, int devices);

/// A schedule made for a placement, and how.
struct MadeSchedule {
  Schedule schedule;
  std::string method;        ///< `baseline NAME`, or `searched (METHOD)` (ScheduleSearchResult)
  double period = 0;         ///< the steady-state period
  double search_time_s = 0;  ///< wall time spent building or searching
};

/// The schedule of `p` for `micro_batches` micro-batches under `memory` per device: the baseline
/// `baseline` (baseline_names()) when given, else search_schedule() stopped after `time_limit_s`.
/// The request is checked first (check_request: counts and a limit the placement can meet).
Result<MadeSchedule> make_schedule(const BlockPlacement& p, int micro_batches, double memory,
                                   const std::string& baseline, double time_limit_s);

}  // namespace heddle::pipeline
