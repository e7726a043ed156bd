// Resharding: the cheapest sequence of per-axis steps (all-gather, reduce-scatter, all-reduce,
// all-to-all, local slice) that turns one placement of a tensor into another, found as a shortest
// path over placements and priced through a CommCost.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/TensorType.h"
#include "heddle/sharding/CommCost.h"
#include "heddle/sharding/Placement.h"
#include "heddle/support/Result.h"

namespace heddle {

/// One step: the collective over mesh axis `axis` taking the tensor from `from` to `to`.
struct ReshardStep {
  Collective op;
  int64_t axis;
  TensorSharding from, to;
  double bytes;  ///< the S of the collective's cost formula (see CommCost::cost)
  double cost;

  /// `all-gather(tp): [Shard(0), Shard(1)] -> [Shard(0), Replicate]`.
  std::string to_string(const Mesh& mesh) const;
};

/// The steps and their total cost; empty when the placements are equal.
struct ReshardPlan {
  std::vector<ReshardStep> steps;
  double cost = 0;

  std::string to_string(const Mesh& mesh) const;
};

/// The single-axis steps valid from `s` for a tensor of `type` on `mesh`. A step may touch the
/// placement of a tensor dim only on the most minor axis that shards it (before and after), so
/// every step moves contiguous blocks. Precondition: s.rank() == mesh.rank().
std::vector<ReshardStep> reshard_steps(const TensorType& type, const Mesh& mesh,
                                       const TensorSharding& s, const CommCost& cost);

/// The cheapest sequence of steps from `from` to `to` (Dijkstra over placements; ties broken by
/// fewer steps, then by placement order, so the result is deterministic). A target that no step
/// sequence reaches (blocks that do not nest in `from` or `to`, see TensorSharding::blocks_nest;
/// a Partial that `from` lacks) is a diagnostic. Dims the mesh does not divide are fine otherwise:
/// every step moves the intersections of uneven blocks.
/// Precondition: both have rank mesh.rank().
Result<ReshardPlan> plan_reshard(const TensorType& type, const Mesh& mesh,
                                 const TensorSharding& from, const TensorSharding& to,
                                 const CommCost& cost);

}  // namespace heddle
