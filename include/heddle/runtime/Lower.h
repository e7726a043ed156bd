// Lowering: a graph plus a sharding plan becomes one SPMD program per device: loads of local
// tiles, the cheapest reshard collectives between producer and consumer placements, halo fetches
// for windowed ops, kernel calls on local index boxes, frees after last use. The programs are
// lowered once, as a template all devices share, and instantiated per device.
#pragma once

#include <vector>

#include "heddle/runtime/Program.h"
#include "heddle/runtime/ProgramTemplate.h"
#include "heddle/sharding/ShardingPlan.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Options of lower().
struct LowerOptions {
  /// Fuse chains of elementwise ops (each consuming the previous result) into one instruction
  /// whose intermediates are never stored. Default true.
  bool fuse_elementwise = true;
  /// Reshard every graph output to Replicate at the end, so every device holds it (what an MPI
  /// rank needs). Off, each output stays as its producer placed it but for pending sums, which
  /// are combined (Partial axes become Replicate): the devices' tiles then cover it together,
  /// and a runner whose devices share memory assembles it from them (ThreadedRunner), without
  /// the trailing all-gathers (a ZeRO or tensor-parallel step's updated parameters and optimizer
  /// state). Default true.
  bool replicate_outputs = true;
  /// Prices reshard paths; null (default) uses BytesMovedCost.
  const CommCost* cost = nullptr;
  /// Lower only these devices' programs (an MPI rank needs only its own); empty (default): all.
  std::vector<int64_t> devices;
  /// Ring attention: leave out the block kernels a causal mask hides entirely (causal_blocks():
  /// scores the mask replaces, or key blocks whose probabilities are all zero). Default true.
  bool skip_hidden_blocks = true;
  /// Lower each optimizer update (a training step's AdamW or SGD) right after the op that
  /// completes its gradient, while that gradient is still in the caches, instead of where the
  /// graph has it (after the whole backward pass). The values computed are the same. Only on a
  /// mesh of one device: with more, the gradients' all-reduces stay next to each other at the
  /// end, where the executor batches them into few collectives. Default true.
  bool early_updates = true;
};

/// Every device's program as one shared template (`options.devices` is not used): the work and
/// memory of lowering do not grow with the mesh; instantiate() gives one device's program. A plan
/// whose strategies do not fit the graph (see ShardingPlan::check) is a diagnostic.
/// Precondition: `g` passed verify().
Result<ProgramTemplate> lower_template(const Graph& g, const ShardingPlan& plan,
                                       const LowerOptions& options = {});

/// The programs of every device of `plan.mesh` (or of `options.devices`, in that order):
/// lower_template() instantiated per device. A plan whose strategies do not fit the graph (see
/// ShardingPlan::check) is a diagnostic. Precondition: `g` passed verify(); listed devices exist.
Result<std::vector<DeviceProgram>> lower(const Graph& g, const ShardingPlan& plan,
                                         const LowerOptions& options = {});

/// Counts of what lowering emitted over all devices, for summaries and tests.
struct ProgramStats {
  int64_t kernels = 0;      ///< kernel calls
  int64_t fused = 0;        ///< instructions holding more than one call
  int64_t collectives = 0;  ///< collective instructions
  int64_t fetches = 0;      ///< halo fetches
  int64_t ring_steps = 0;   ///< ring attention's point-to-point steps (among the collectives)
  double comm_bytes = 0;    ///< bytes moved per device, summed over devices (BytesMovedCost)
};

/// Statistics of lowered programs.
ProgramStats program_stats(const Graph& g, const std::vector<DeviceProgram>& programs);

/// Statistics of every device's program of `t`, instantiated one device at a time (memory stays
/// that of one program). Precondition: `t` was lowered from `g`.
ProgramStats program_stats(const Graph& g, const ProgramTemplate& t);

}  // namespace heddle
