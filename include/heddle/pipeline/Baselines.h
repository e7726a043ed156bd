// The fixed pipeline schedules, built directly: GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2,
// Chimera, and the trivial sequential schedule (one micro-batch at a time).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// A baseline schedule and its steady-state period (time one more micro-batch adds).
struct BaselineSchedule {
  std::string name;
  Schedule schedule;
  double period = 0;
};

/// Every baseline name: gpipe, 1f1b, interleaved, zb-h1, zb-h2, chimera, sequential.
std::vector<std::string> baseline_names();

/// The baselines that apply to `p` with `m` micro-batches: gpipe and sequential apply to every
/// placement; 1f1b to the vshape family; interleaved to the interleaved family when p divides
/// m; zb-h1/zb-h2 to vshape-zb; chimera to xshape. Memory is not considered here.
std::vector<std::string> applicable_baselines(const BlockPlacement& p, int m);

/// Builds baseline `name` for `m` >= 1 micro-batches of `p`. A Diagnostic when the name is
/// unknown or the baseline does not apply to `p` (the message lists those that do). The result
/// respects dependencies and device exclusivity; its memory is whatever the baseline needs.
/// Precondition: check_placement(p) succeeded.
Result<BaselineSchedule> build_baseline(std::string_view name, const BlockPlacement& p, int m);

/// One micro-batch after another, each block as early as possible: always valid when the limit
/// admits one micro-batch, and the least memory-hungry schedule. Precondition: p checked, m >= 1.
BaselineSchedule sequential_schedule(const BlockPlacement& p, int m);

/// Start times from per-device operation orders (op = micro * blocks + block): each operation
/// starts when its dependencies and the previous operation on each of its devices end.
/// Precondition: the orders cover every operation exactly once per device it occupies and are
/// consistent with the dependencies (no deadlock).
Schedule schedule_from_device_orders(const BlockPlacement& p, int m,
                                     const std::vector<std::vector<int>>& orders);

}  // namespace heddle::pipeline
