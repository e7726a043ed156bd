// The shared form of lowered SPMD programs: every device of a mesh runs the same instruction
// sequence, so lowering stores it once, with each instruction's per-device parts (tile and kernel
// boxes, groups) kept as recipes that one device's program is instantiated from on demand.
#pragma once

#include <optional>
#include <vector>

#include "heddle/runtime/CausalBlocks.h"
#include "heddle/runtime/Program.h"
#include "heddle/sharding/OpStrategy.h"
#include "heddle/sharding/Placement.h"

namespace heddle {

/// One instruction of every device's program: the fields of Instr that are the same on all
/// devices, and the recipe of those that are not.
struct InstrTemplate {
  Instr::Kind kind = Instr::Kind::kFree;
  ValueId value = -1;
  Collective collective = Collective::kSlice;  ///< kCollective
  Monoid monoid = Monoid::kSum;                ///< kCollective
  /// Index into ProgramTemplate::shardings, -1 if unused. kLoad, kCollective: the value's
  /// placement after the instruction (a device's box is its block); kFetch: the value's
  /// placement (the group is the devices holding the same block).
  int32_t sharding = -1;
  int32_t axis = -1;   ///< kCollective: the mesh axis whose group takes part
  OpId op = -1;        ///< kFetch: the op the halo tile is fetched for
  int32_t input = -1;  ///< kFetch: which input of `op`
  /// kKernel: the ops called in order, each over the device's local index box of its strategy.
  std::vector<OpId> calls;
  std::vector<ValueId> temporaries;  ///< kKernel: as Instr::temporaries
  /// Ring attention (Instr::ring): the step or block, -1 if none. kCollective: `sharding` is the
  /// value's placement before the gather (whose block on a member is what it sends), `whole`
  /// the gathered one. kKernel: `axis` the ring's mesh axis, `input` the input read block by
  /// block, `sharding` its placement before the gather, `ring_dim` the index dim its blocks cut
  /// (coefficient 1 in tensor dim `ring_tensor_dim` of that input's projection).
  int32_t ring = -1;
  int32_t whole = -1;
  int32_t ring_dim = -1, ring_tensor_dim = -1;
  bool combine = false;  ///< kKernel: as Instr::combine (the kernels' accumulate mode)
  /// kKernel of a ring block after the first: the causal mask that hides some blocks entirely;
  /// a device whose block it hides gets no instruction for it. Default none.
  std::optional<CausalBlocks> hidden;
};

/// Every device's program of one lowering. Its size does not depend on the number of devices.
struct ProgramTemplate {
  Mesh mesh;
  std::vector<OpStrategy> strategies;     ///< per op of the graph: the plan's strategies
  std::vector<TensorSharding> shardings;  ///< referenced by InstrTemplate::sharding
  std::vector<InstrTemplate> instrs;
};

/// The program of `device`: boxes and groups evaluated for that device. Precondition: `t` was
/// lowered from `g`; 0 <= device < t.mesh.num_devices().
DeviceProgram instantiate(const Graph& g, const ProgramTemplate& t, int64_t device);

}  // namespace heddle
