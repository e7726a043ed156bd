// IndexProjection: how an op's index points address one tensor. Point p touches the tensor box
// `[A p + b, A p + b + window)`. Halos and partial sums follow from these.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/AffineMap.h"

namespace heddle {

/// An immutable affine map plus a window shape. Invariant: window.size() == map.out_rank() and
/// every window extent >= 0.
class IndexProjection {
 public:
  IndexProjection() = default;
  /// Precondition: window.size() == map.out_rank(), window >= 0.
  IndexProjection(AffineMap map, IVec window);
  /// A projection with a unit window.
  explicit IndexProjection(AffineMap map);

  const AffineMap& map() const { return map_; }
  const IVec& window() const { return window_; }
  int64_t index_rank() const { return map_.in_rank(); }
  int64_t tensor_rank() const { return map_.out_rank(); }

  /// The tensor box one index point touches. Precondition: p.size() == index_rank().
  Box window_at(const IVec& p) const;
  /// The exact smallest tensor box touched by every point of index box `b`: the map's image with
  /// its upper end extended by window - 1. Empty `b` gives an empty box.
  /// Precondition: b.rank() == index_rank().
  Box image(const Box& b) const;
  /// The projection of `p -> inner(p)` first, then this: reindexing the index space.
  /// Precondition: inner.out_rank() == index_rank().
  IndexProjection compose(const AffineMap& inner) const;
  /// How much the tensor boxes of two neighbouring points along index dim `i` overlap, per tensor
  /// dim: max(window_j - |A_ji|, 0). Where A_ji != 0 this is the halo a sharded windowed op needs;
  /// where A_ji == 0 neighbours share the whole window along j.
  /// Precondition: 0 <= i < index_rank().
  IVec marginal_overlap(int64_t i) const;

  /// `(d0, 2*d1 - 1)[1, 3]` (the window is omitted when it is all ones).
  std::string to_string() const;
  /// The same with the index dims named: `(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 3, 3]`.
  std::string to_string(const std::vector<std::string>& names) const;
  bool operator==(const IndexProjection&) const = default;
  size_t hash() const;

 private:
  AffineMap map_;
  IVec window_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::IndexProjection> {
  size_t operator()(const heddle::IndexProjection& p) const { return p.hash(); }
};
