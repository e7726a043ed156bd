// Tensor placements on a mesh, one per mesh axis, in DTensor's notation: `[Shard(0), Replicate]`,
// `Partial(sum)`. Several axes may shard one tensor dim: major to minor in mesh-axis order.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Box.h"
#include "heddle/ir/IndexSpace.h"
#include "heddle/sharding/Mesh.h"

namespace heddle {

/// How a tensor lies along one mesh axis.
class Placement {
 public:
  enum class Kind : uint8_t { kReplicate, kShard, kPartial };

  /// Replicate.
  Placement() = default;
  static Placement replicate() { return Placement(); }
  /// Shard tensor dim `dim`. Precondition: dim >= 0.
  static Placement shard(int64_t dim);
  /// Partial results still to be combined with `monoid`.
  static Placement partial(Monoid monoid);

  Kind kind() const { return kind_; }
  bool is_replicate() const { return kind_ == Kind::kReplicate; }
  bool is_shard() const { return kind_ == Kind::kShard; }
  bool is_partial() const { return kind_ == Kind::kPartial; }
  /// The sharded dim. Precondition: is_shard().
  int64_t dim() const;
  /// The pending reduction. Precondition: is_partial().
  Monoid monoid() const;

  /// `Replicate`, `Shard(1)`, `Partial(sum)`.
  std::string to_string() const;
  bool operator==(const Placement&) const = default;
  auto operator<=>(const Placement&) const = default;

 private:
  Kind kind_ = Kind::kReplicate;
  int64_t dim_ = 0;
  Monoid monoid_ = Monoid::kSum;
};

/// A tensor's placement on every axis of a mesh. Value type.
class TensorSharding {
 public:
  TensorSharding() = default;
  explicit TensorSharding(std::vector<Placement> per_axis) : p_(std::move(per_axis)) {}
  /// Replicated on every axis of a mesh of `rank` axes.
  static TensorSharding replicated(int64_t rank);

  int64_t rank() const { return static_cast<int64_t>(p_.size()); }
  const std::vector<Placement>& placements() const { return p_; }
  /// Placement on axis `a`. Precondition: 0 <= a < rank().
  const Placement& at(int64_t a) const;
  /// A copy with axis `a` set to `p`.
  TensorSharding with(int64_t a, Placement p) const;
  /// True when some axis is Partial.
  bool has_partial() const;
  /// The mesh axes that shard tensor dim `d`, major to minor.
  std::vector<int64_t> axes_sharding(int64_t d) const;
  /// Number of blocks tensor dim `d` is cut into on `mesh`.
  int64_t shards_of_dim(int64_t d, const Mesh& mesh) const;
  /// The block of a tensor of `shape` that `device` holds. Blocks use ceiling division (trailing
  /// blocks may be smaller or empty). Precondition: mesh.rank() == rank(), shard dims < rank of
  /// shape.
  Box local_box(const IVec& shape, const Mesh& mesh, int64_t device) const;
  /// The shape of the largest local block (the per-device buffer size).
  IVec local_shape(const IVec& shape, const Mesh& mesh) const;
  /// True when, for every tensor dim of `shape` that several axes cut, the blocks nest: each
  /// block cut by the first j of those axes is the union of the blocks cut by the first j + 1
  /// (always so when the mesh divides the dim; `10` cut 2 x 3 does not nest: blocks of 5 vs 3 of
  /// 2). Resharding on one axis then moves whole blocks. Precondition: as local_box().
  bool blocks_nest(const IVec& shape, const Mesh& mesh) const;

  /// `[Shard(0), Replicate]`.
  std::string to_string() const;
  bool operator==(const TensorSharding&) const = default;
  auto operator<=>(const TensorSharding&) const = default;
  size_t hash() const;

 private:
  std::vector<Placement> p_;
};

/// Block `k` of `n` of the range `[0, extent)` (ceiling division, never negative).
Box block_of(int64_t extent, int64_t n, int64_t k);

}  // namespace heddle

template <>
struct std::hash<heddle::TensorSharding> {
  size_t operator()(const heddle::TensorSharding& s) const { return s.hash(); }
};
