// The ASCII timeline of a schedule: one row per device, one cell per time unit, each block drawn
// as its type's first letter and its micro-batch number, then '-' while it runs; '.' is idle.
#pragma once

#include <string>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// Renders `s`. The time unit is 1 when every start and span is whole, else the shortest span
/// divided until starts fall on cells (times are rounded to the nearest cell). `max_cells` > 0
/// truncates each row after that many cells and says how many were left out. Precondition: s
/// was made for p.
std::string render_timeline(const BlockPlacement& p, const Schedule& s, int max_cells = 0);

}  // namespace heddle::pipeline
