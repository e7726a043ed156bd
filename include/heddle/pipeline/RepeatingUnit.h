// The steady state of a pipeline schedule as a repeating unit: one micro-batch's blocks placed on
// a modulo reservation table of period T, so micro-batch i runs block b at i*T + offset[b].
#pragma once

#include <optional>
#include <vector>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {

/// A cyclic schedule: period `period` and the start offset of each block for micro-batch 0.
struct RepeatingUnit {
  double period = 0;
  std::vector<double> offset;

  bool operator==(const RepeatingUnit&) const = default;
};

/// Places the blocks of one micro-batch in `order` (a topological order of p) on a modulo
/// reservation table: each at the earliest offset after its dependencies end at which all its
/// devices are free modulo `period`. nullopt when a block finds no free slot within one period
/// of its earliest start (then the period is too short). Precondition: period >= every span.
std::optional<RepeatingUnit> modulo_schedule(const Placement& p, double period,
                                             const std::vector<int>& order);

/// The schedule of `m` micro-batches that repeats `unit`: start(i, b) = i * period + offset[b].
/// Valid for dependencies and exclusivity by construction; memory must still be checked.
Schedule unroll(const RepeatingUnit& unit, int m);

}  // namespace heddle::pipeline
