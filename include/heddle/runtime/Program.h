// Device programs: what one device executes for a partitioned graph. Loads of its tiles, reshard
// collectives over mesh-axis groups, halo fetches, kernel calls on local index boxes (elementwise
// chains fused into one instruction), frees. Printed as text, one instruction per line.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ir/IndexSpace.h"
#include "heddle/sharding/CommCost.h"
#include "heddle/sharding/Mesh.h"

namespace heddle {

/// One kernel call: op `op` over index box `box` of its index space.
struct KernelCall {
  OpId op = -1;
  Box box;
};

/// One instruction of a device program.
struct Instr {
  enum class Kind : uint8_t {
    kLoad,        ///< take this device's tile `box` of a graph input or parameter
    kCollective,  ///< `collective` over `group`; the value's tile becomes `box`
    kFetch,       ///< assemble halo tile `box` of `value` from `group` for the next kernel
    kKernel,      ///< run `calls` in order (more than one: a fused elementwise chain)
    kFree,        ///< drop the value's tile
  };
  Kind kind = Kind::kFree;
  ValueId value = -1;
  Box box;
  Collective collective = Collective::kSlice;
  Monoid monoid = Monoid::kSum;  ///< how all-reduce and reduce-scatter combine
  std::vector<int64_t> group;    ///< devices taking part, in rank order (same on every member)
  std::vector<KernelCall> calls;
  /// Values produced inside a fused chain and consumed only there: never stored.
  std::vector<ValueId> temporaries;
  /// Ring attention (cp_comm=ring; docs/sharding.md, "Ring attention"); -1 otherwise.
  /// kCollective (kSendRecv over `group`, in ring order): step 1..n-1, which sends the block the
  /// device last received (its own at step 1) to the next member, receives `box` from the
  /// previous one and copies it into the value's gathered tile `whole` (step 1 makes that tile
  /// from the device's own block). kKernel: the block 0..n-1 whose keys its one call covers;
  /// block 0 makes the results' tiles over the images of `whole`, the op's local index box, and
  /// later blocks write their part of them (or, with `combine`, add into them: the block's
  /// split dim is a reduce dim).
  int32_t ring = -1;
  Box whole;
  bool combine = false;
};

/// The program of one device of a mesh.
struct DeviceProgram {
  int64_t device = 0;
  std::vector<Instr> instrs;

  /// The text form, one instruction per line, names from `g`.
  std::string to_string(const Graph& g, const Mesh& mesh) const;
};

/// The smallest box covering every tile `p` loads of each graph input and parameter it loads
/// (values it never loads are absent): what a device must hold of them.
std::map<ValueId, Box> load_hulls(const DeviceProgram& p);

/// The smallest box containing both `a` and `b`. Precondition: same rank.
Box box_hull(const Box& a, const Box& b);

}  // namespace heddle
