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

/// How `modulo_schedule` treats blocks on several devices.
enum class MultiDevice {
  kInOrder,        ///< Like any block, in priority order (with eviction when they find no slot).
  kReserveAtHead,  ///< Reserve their slot modulo the period first, near their earliest start.
  kReservePacked,  ///< Reserve their slots first, packed from offset 0.
};

/// Places the blocks of one micro-batch on a modulo reservation table (iterative modulo
/// scheduling): in `order` (a priority order; topological for the reserving modes), each block
/// goes to the earliest offset after its placed dependencies at which all its devices are free
/// modulo `period`; with kInOrder a block without such a slot within one period is forced in and
/// evicts what it clashes with. nullopt when that does not settle within a step budget, or (when
/// reserving) a block finds no slot. Precondition: period >= every span.
std::optional<RepeatingUnit> modulo_schedule(const BlockPlacement& p, double period,
                                             const std::vector<int>& order,
                                             MultiDevice multi = MultiDevice::kInOrder);

/// The schedule of `m` micro-batches that repeats `unit`: start(i, b) = i * period + offset[b].
/// Valid for dependencies and exclusivity by construction; memory must still be checked.
Schedule unroll(const RepeatingUnit& unit, int m);

}  // namespace heddle::pipeline
