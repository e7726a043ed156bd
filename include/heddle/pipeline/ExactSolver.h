// The exact method: a time-indexed integer program solved with COIN-OR CBC that proves the
// minimum makespan of small instances (integer spans, a few devices and micro-batches).
#pragma once

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// Options of `solve_exact`.
struct ExactOptions {
  /// Give up after this many seconds (default 60); the result then says it is not proven.
  double time_limit_s = 60.0;
  /// Latest end time considered; 0 (default) takes the makespan of search_schedule, which keeps
  /// the program small and is an upper bound on the optimum.
  int horizon = 0;
  /// Refuse instances with more binary variables than this (default 60000).
  int max_variables = 60000;
};

/// What the integer program found.
struct ExactResult {
  bool optimal = false;  ///< True when CBC proved `makespan` minimal.
  double makespan = 0;   ///< Makespan of `schedule`.
  double bound = 0;      ///< Proven lower bound on the makespan.
  Schedule schedule;     ///< The best schedule (valid under the memory limit).
};

/// Minimizes the makespan of `m` micro-batches of `p` under `memory_limit` per device, exactly.
/// Variables x[o][t] = 1 when operation o starts at integer time t; rows: each operation starts
/// once, dependencies (disaggregated), one block per device per time, running memory <= limit,
/// makespan >= every end; micro-batches are ordered by their first block's start (they are
/// interchangeable). A Diagnostic when spans are not whole numbers, the request fails
/// check_request, or the program would exceed max_variables.
Result<ExactResult> solve_exact(const BlockPlacement& p, int m, double memory_limit,
                                const ExactOptions& options = {});

}  // namespace heddle::pipeline
