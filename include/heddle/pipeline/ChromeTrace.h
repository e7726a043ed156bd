// Chrome-trace (Perfetto-openable) JSON for a schedule: one complete event ("ph": "X") per block
// per device, one process per device; one time unit is shown as one second.
#pragma once

#include <string>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// The trace as a JSON text `{"traceEvents": [...], "displayTimeUnit": "ms"}`. Each event has
/// name, cat (block type), ph "X", ts and dur in microseconds, pid = tid = device, and args with
/// the micro-batch and block. Precondition: s was made for p.
std::string chrome_trace_json(const BlockPlacement& p, const Schedule& s);

}  // namespace heddle::pipeline
