// Schedule search for any placement, micro-batch count and memory limit: a repeating unit
// (modulo schedule) turned into warm-up + steady state + cool-down by list scheduling, compared
// against every applicable baseline; the best valid schedule wins.
#pragma once

#include <string>
#include <vector>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// Options of `search_schedule`.
struct ScheduleSearchOptions {
  /// Stop trying longer periods after this many seconds (default 10). Only when it is reached
  /// can the result depend on the machine's speed.
  double time_limit_s = 10.0;
  /// Longest period tried, as a multiple of the lower bound on the period (default 4).
  double max_period_factor = 4.0;
  /// Periods tried after the first one whose plain repeating unit fits in memory (default 2).
  int extra_periods = 2;
  /// Also evaluate the applicable baselines and keep the best (default true).
  bool include_baselines = true;
  /// Instances with at most this many operations (micro-batches x blocks) are finished with a
  /// bounded branch and bound over operation orders (default 32; 0 turns it off).
  int exact_max_ops = 32;
  /// Node budget of that branch and bound (default 200000), so it stays fast and deterministic.
  long exact_node_budget = 200000;
};

/// The best schedule found and what is known about it.
struct ScheduleSearchResult {
  Schedule schedule;
  std::string method;  ///< "unit", "unit+list", "list", "branch-and-bound" or a baseline name.
  double period = 0;   ///< Steady-state time per additional micro-batch.
  double period_lower_bound = 0;  ///< Busiest device's load per micro-batch.
  double makespan = 0;
  double lower_bound = 0;  ///< makespan_lower_bound(p, m).
  int candidates = 0;      ///< Valid schedules compared.
  double search_time_s = 0;
};

/// The least memory limit under which the search is sure to find a schedule: the largest, over
/// devices, peak of running `m` micro-batches one after another. Precondition: p checked, m >= 1.
double minimum_memory(const BlockPlacement& p, int m);

/// Checks the request: p valid, m >= 1, memory_limit >= minimum_memory (the message says the
/// minimum and which device needs it).
Status check_request(const BlockPlacement& p, int m, double memory_limit);

/// Searches a schedule of `m` micro-batches of `p` whose running memory stays within
/// `memory_limit` on every device, minimizing the makespan. Never worse than any applicable
/// baseline that fits the limit (when include_baselines). Deterministic unless the time limit is
/// reached. A Diagnostic when check_request fails.
Result<ScheduleSearchResult> search_schedule(const BlockPlacement& p, int m, double memory_limit,
                                             const ScheduleSearchOptions& options = {});

}  // namespace heddle::pipeline
