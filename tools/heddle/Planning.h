// The planning calls run and show share, and the verifier report they print first.
#pragma once

#include "heddle/ir/Graph.h"
#include "heddle/runtime/ProgramFiles.h"
#include "heddle/search/RunPlan.h"

namespace heddle::cli {

// The run planner lives in search (RunPlan.h); these names serve MpiRun.cpp until it moves into
// the runtime.
using search::plan_run;
using search::PlannedRun;
using search::requested_strategy;

/// Prints every verifier diagnostic (up to 20) to stderr; returns 1 when there were any.
int report_verify(const Graph& g);

}  // namespace heddle::cli
