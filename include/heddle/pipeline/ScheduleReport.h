// What `heddle schedule` reports of a schedule it made: the figures (makespan, period, bubble,
// peak memory per device, lower bound, search time), whether it is valid under the memory limit,
// the timeline, as text or one JSON line.
#pragma once

#include <string>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"
#include "heddle/pipeline/ScheduleRequest.h"
#include "heddle/support/Result.h"

namespace heddle::pipeline {

/// A made schedule measured.
struct ScheduleReport {
  std::string placement;    ///< the placement's name
  int devices = 0;          ///< its devices
  int micro_batches = 0;    ///< as requested
  double memory_limit = 0;  ///< per device, as requested
  MadeSchedule made;        ///< the schedule and how it was made
  ScheduleStats stats;      ///< compute_stats()
  double lower_bound = 0;   ///< makespan_lower_bound()
  Status valid;             ///< validate_schedule() under `memory_limit`
  std::string timeline;     ///< render_timeline()
};

/// Measures `made` for `p` with `micro_batches` under `memory` per device; the timeline shows at
/// most `max_cells` cells per device (0: all).
ScheduleReport report_schedule(const BlockPlacement& p, MadeSchedule made, int micro_batches,
                               double memory, int max_cells);

/// Why the schedule is not valid, as a warning line (`warning: the ... schedule is not valid
/// under --memory M: ...`); empty when it is valid.
std::string invalid_warning(const ScheduleReport& r);

/// The text: the request, the method, the timeline, then one line per figure.
std::string to_string(const ScheduleReport& r);

/// One JSON object on one line: makespan, period, bubble_fraction, peak_memory, lower_bound,
/// search_time_s, valid, method, placement, devices, micro_batches, memory_limit.
std::string to_json(const ScheduleReport& r);

}  // namespace heddle::pipeline
