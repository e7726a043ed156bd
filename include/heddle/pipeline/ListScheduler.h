// Greedy list scheduling of many micro-batches: whenever a device is free, start the ready
// operation with the best priority whose memory fits. The building block of baselines and search.
#pragma once

#include <optional>
#include <vector>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// Options of `list_schedule`.
struct ListOptions {
  /// Per-device memory limit on the running sum of deltas; empty = no limit (default empty).
  std::vector<double> memory_limit;
  /// When true (default false), a ready multi-device operation that waits only for busy devices
  /// reserves its idle devices, so operations of lower priority cannot delay it indefinitely.
  bool reserve = false;
  /// When true (default false), a block of micro-batch i may take memory only if what is left
  /// still covers the positive memory that started micro-batches j < i have yet to take on that
  /// device, so later micro-batches cannot starve earlier ones into a deadlock.
  bool protect_earlier = false;
};

/// Schedules `m` micro-batches of `p`. `key[op]` (op = micro * blocks + block) is the priority,
/// lower first, ties by op. Events are processed in time order; at each event every free device
/// starts the best-priority ready operation that fits the memory limit on all its devices (a
/// block with memory delta <= 0 always fits). Returns nullopt on deadlock (operations remain,
/// none can start, none is running). Precondition: key.size() == m * p.blocks.size().
std::optional<Schedule> list_schedule(const BlockPlacement& p, int m,
                                      const std::vector<double>& key,
                                      const ListOptions& options = {});

}  // namespace heddle::pipeline
