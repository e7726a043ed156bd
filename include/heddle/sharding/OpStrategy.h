// Op sharding strategies derived mechanically from index projections: a strategy says, per mesh
// axis, which index dim the axis splits (or none); every operand's placement and halo follows.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/sharding/Placement.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Per mesh axis, the index dim it splits, or -1 (the op is computed replicated on that axis).
class OpStrategy {
 public:
  OpStrategy() = default;
  explicit OpStrategy(std::vector<int64_t> dim_per_axis) : dims_(std::move(dim_per_axis)) {}
  /// Replicated compute on a mesh of `rank` axes.
  static OpStrategy replicated(int64_t rank) {
    return OpStrategy(std::vector<int64_t>(static_cast<size_t>(rank), -1));
  }

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  /// The index dim axis `a` splits, or -1. Precondition: 0 <= a < rank().
  int64_t dim(int64_t a) const { return dims_.at(static_cast<size_t>(a)); }
  const std::vector<int64_t>& dims() const { return dims_; }
  /// The op's index box computed by `device`: each split index dim cut major to minor in
  /// mesh-axis order. Precondition: mesh.rank() == rank().
  Box local_index_box(const IndexSpace& space, const Mesh& mesh, int64_t device) const;

  /// `{dp: m, tp: -}` with dim names from `space`.
  std::string to_string(const IndexSpace& space, const Mesh& mesh) const;
  bool operator==(const OpStrategy&) const = default;
  auto operator<=>(const OpStrategy&) const = default;

 private:
  std::vector<int64_t> dims_;
};

/// The placement an operand or result takes under a strategy, plus the halo (elements beyond its
/// own block, per tensor dim, below and above) that a windowed op reads from neighbours.
struct OperandSharding {
  TensorSharding sharding;
  IVec halo_lo, halo_hi;

  bool has_halo() const { return halo_lo.sum() + halo_hi.sum() > 0; }
  bool operator==(const OperandSharding&) const = default;
};

/// The placements of every input and result of an op under one strategy.
struct StrategyPlacements {
  std::vector<OperandSharding> inputs;
  std::vector<OperandSharding> results;
  bool operator==(const StrategyPlacements&) const = default;
};

/// How derive_placements() checks the blocks of a sharded tensor dim against what each shard of
/// the op reads or writes there.
enum class ShardCheck : uint8_t {
  /// Only the shards that decide the outcome (the first and last, and those next to where a
  /// clip or comparison switches): the same result as kEvery, in time independent of the number
  /// of shards when the index dim splits evenly. Default.
  kDeciding,
  /// Every shard in turn: the straightforward check, kept as the oracle tests compare with.
  kEvery,
};

/// Derives the placements of op `id` under strategy `s` on `mesh`, from the projections alone
/// (DESIGN.md, "Sharding"): an axis splitting index dim i shards tensor dim d of an operand whose
/// projection has its only nonzero entry of column i in row d, where i is the only dim of that row
/// or its most major one; a zero column gives Replicate (inputs) or Partial (results, reduce dims).
/// Each device's needed box must lie within its own block plus a halo smaller than a block, and
/// results must be exactly their blocks. A strategy that breaks a rule, or whose extents the mesh
/// does not divide, is a diagnostic saying why and what would divide (the first failing shard,
/// whichever `check` is used). Precondition: the graph passed verify(); s.rank() == mesh.rank().
Result<StrategyPlacements> derive_placements(const Graph& g, OpId id, const Mesh& mesh,
                                             const OpStrategy& s,
                                             ShardCheck check = ShardCheck::kDeciding);

/// Every valid strategy of op `id` on `mesh`, in a deterministic order (replicated first).
/// `check` as in derive_placements(). Precondition: the graph passed verify().
std::vector<OpStrategy> enumerate_strategies(const Graph& g, OpId id, const Mesh& mesh,
                                             ShardCheck check = ShardCheck::kDeciding);

}  // namespace heddle
