// ShardingPlan: a mesh plus one strategy per op of a graph: everything lowering needs to produce
// per-device programs. Printed as one line per op with the placements it implies.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/sharding/OpStrategy.h"

namespace heddle {

/// A strategy for every op of one graph on one mesh.
struct ShardingPlan {
  Mesh mesh;
  std::vector<OpStrategy> ops;  ///< indexed by OpId
  /// Where graph inputs and parameters start (user pins); others start where their first
  /// consumer wants them.
  std::map<ValueId, TensorSharding> pinned;
  /// The mesh axis whose all-gathers of an op's input lower as ring steps interleaved with the
  /// op's blocks (`cp_comm=ring` on the cp axis; docs/sharding.md, "Ring attention"); -1 (the
  /// default): every reshard is one collective.
  int64_t ring_axis = -1;

  /// Every op replicated on every axis (data moves only for outputs).
  static ShardingPlan replicated(const Graph& g, const Mesh& mesh);
  /// Checks sizes and derives every op's placements; the first op that cannot take its strategy
  /// is the diagnostic. Precondition: the graph passed verify().
  Status check(const Graph& g) const;
  /// One line per op: `%h = einsum {dp: m, tp: -}  %x [Shard(0), Replicate] ... -> [..]`.
  std::string to_string(const Graph& g) const;
  bool operator==(const ShardingPlan&) const = default;
};

}  // namespace heddle
