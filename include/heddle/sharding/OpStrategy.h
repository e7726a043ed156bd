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

/// The placement an operand or result takes under a strategy, plus the halo: per tensor dim, the
/// most elements any device reads below and above its own block (from neighbours, or from
/// devices further away: lowering fetches them from whichever devices own them).
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

/// Whether and how splitting index dim `i` places one operand, from its projection alone: the
/// one rule that decides "can this projection be split" (docs/sharding.md, "Strategies from
/// projections"). Column `i` of the projection's matrix nonzero in some row: Shard of the first
/// such tensor dim, whatever the coefficients (sums `x(i + t)`, reversals `15 - i`, strides) and
/// offsets, since each device then fetches whatever range it reads from whichever devices own it;
/// a result's column must reach exactly one tensor dim. Column zero: Replicate for an input,
/// Partial(monoid of i) for a result when `i` is a reduce dim. Otherwise a diagnostic saying why
/// (without the op's name). Whether each block then fits is derive_placements()'s business.
/// Precondition: 0 <= i < space.rank(), proj.index_rank() == space.rank().
Result<Placement> split_placement(const IndexProjection& proj, const IndexSpace& space, int64_t i,
                                  bool is_result);

/// Derives the placements of op `id` under strategy `s` on `mesh`, from the projections alone
/// (DESIGN.md, "Sharding"): every axis places every operand by split_placement(). Blocks use
/// ceiling division, so extents the mesh does not divide give smaller (or empty) trailing blocks;
/// a tensor dim cut by several axes must nest (TensorSharding::blocks_nest). An input may read any
/// range of a sharded dim: its halo is the number of elements read below and above its own block,
/// fetched from whichever devices own them (any size, even a block far away). Results must be
/// exactly their blocks. A strategy that breaks a rule is a diagnostic saying why (the first
/// failing shard, whichever `check` is used). Precondition: the graph passed verify();
/// s.rank() == mesh.rank().
Result<StrategyPlacements> derive_placements(const Graph& g, OpId id, const Mesh& mesh,
                                             const OpStrategy& s,
                                             ShardCheck check = ShardCheck::kDeciding);

/// Every valid strategy of op `id` on `mesh`, in a deterministic order (replicated first).
/// `check` as in derive_placements(). Precondition: the graph passed verify().
std::vector<OpStrategy> enumerate_strategies(const Graph& g, OpId id, const Mesh& mesh,
                                             ShardCheck check = ShardCheck::kDeciding);

}  // namespace heddle
