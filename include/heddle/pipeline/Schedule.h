// Schedule: the start time of every block of every micro-batch, and what follows from it
// (makespan, bubble fraction, peak memory per device), plus the makespan lower bound.
#pragma once

#include <string>
#include <vector>

#include "heddle/pipeline/Placement.h"

namespace heddle::pipeline {

/// Start times of `micro_batches` copies of a placement with `blocks` blocks each. Operation
/// `op = micro * blocks + block` starts at `start[op]`.
struct Schedule {
  int micro_batches = 0;
  int blocks = 0;
  std::vector<double> start;

  /// Start of `block` in `micro`. Precondition: both in range.
  double at(int micro, int block) const {
    return start[static_cast<size_t>(micro) * blocks + block];
  }
  /// Number of operations (micro_batches * blocks).
  int num_ops() const { return micro_batches * blocks; }
  bool operator==(const Schedule&) const = default;
  /// One line per operation, `micro block start`, in operation order.
  std::string to_string(const BlockPlacement& p) const;
};

/// What a schedule achieves. `bubble_fraction` = idle device-time / (devices * makespan).
struct ScheduleStats {
  double makespan = 0;
  double bubble_fraction = 0;
  std::vector<double> busy;         ///< Busy time per device.
  std::vector<double> peak_memory;  ///< Highest running memory sum per device (>= 0).
};

/// Makespan, busy time, bubble fraction and peak memory of `s`. Precondition: `s` was made for
/// `p` (s.blocks == p.blocks.size()); it need not be valid.
ScheduleStats compute_stats(const BlockPlacement& p, const Schedule& s);

/// Per device, the most memory-holding blocks alive at once under `s`: each block with a
/// positive memory delta counts one from its start, each block with a negative delta ends one
/// (its own micro-batch's holder) from its start, as compute_stats() charges memory. For a
/// training placement whose forward blocks keep activations and whose backward (or weight-grad)
/// blocks free them, this is the number of micro-batch chunks whose activations a device holds
/// at its peak: `p - d` on stage d of 1F1B, Megatron's interleaved warm-up count plus one.
/// Precondition: as compute_stats().
std::vector<int> peak_in_flight(const BlockPlacement& p, const Schedule& s);

/// A lower bound on the makespan of any schedule of `m` micro-batches, ignoring memory: the
/// larger of one micro-batch's critical path and, for every device, the earliest its first block
/// can start + m * its load + the shortest tail after its last block. Precondition: p checked.
double makespan_lower_bound(const BlockPlacement& p, int m);

/// The same schedule with every block moved as early as the order of blocks on each device and
/// the dependencies allow. Per-device order is kept, so peak memory is unchanged and the makespan
/// never grows. Precondition: `s` respects dependencies and device exclusivity.
Schedule left_justify(const BlockPlacement& p, const Schedule& s);

/// Start times from a global operation sequence: each operation starts once its dependencies
/// end and the previous operation of the sequence on each of its devices ends. Precondition:
/// `sequence` lists every operation of `m` micro-batches once, dependencies first.
Schedule schedule_from_sequence(const BlockPlacement& p, int m, const std::vector<int>& sequence);

}  // namespace heddle::pipeline
