// The independent validity checker for schedules: dependencies respected, at most one block per
// device at a time, running memory never above the limit on any device.
#pragma once

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// Time tolerance of the checker (times are sums of spans; this absorbs rounding).
inline constexpr double kTimeEpsilon = 1e-9;

/// Checks `s` against `p` and `memory_limit` (per device; the running sum of memory deltas of
/// started blocks, from 0, must stay <= the limit). Returns the first violation found, naming
/// the micro-batch, block, device and times: shape mismatch, negative or non-finite start,
/// dependency, overlap, memory. Precondition: check_placement(p) succeeded.
Status validate_schedule(const BlockPlacement& p, const Schedule& s, double memory_limit);

}  // namespace heddle::pipeline
