// Box: a half-open integer box `[start, end)` in an index space or a tensor. Empty boxes are
// legal; a 0-d box has one point.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/IVec.h"

namespace heddle {

/// An immutable half-open box. Invariant: start.size() == end.size() and start <= end per dim.
class Box {
 public:
  Box() = default;
  /// Precondition: equal ranks and start[i] <= end[i].
  Box(IVec start, IVec end);
  /// The box `[0, shape)`. Precondition: shape >= 0.
  static Box of_shape(const IVec& shape);

  int64_t rank() const { return start_.size(); }
  const IVec& start() const { return start_; }
  const IVec& end() const { return end_; }
  /// end - start.
  IVec shape() const { return end_ - start_; }
  /// Number of points: product of the extents; 1 for a 0-d box.
  int64_t volume() const { return shape().product(); }
  /// True when some dim has zero extent.
  bool empty() const;
  /// True when `p` lies inside. Precondition: p.size() == rank().
  bool contains(const IVec& p) const;
  /// True when every point of `b` lies inside (an empty `b` is inside anything). Equal ranks.
  bool contains(const Box& b) const;
  /// The intersection; empty (start == end at the clamped point) when disjoint. Equal ranks.
  Box intersect(const Box& b) const;
  /// The box shifted by `offset`. Precondition: offset.size() == rank().
  Box translate(const IVec& offset) const;

  /// Splits dim `dim` into `n` consecutive parts of ceil(extent / n) points; trailing parts may
  /// be smaller or empty, never negative. Precondition: 0 <= dim < rank(), n >= 1.
  std::vector<Box> split(int64_t dim, int64_t n) const;
  /// Part `k` of split(dim, n), without building the others. Precondition: 0 <= k < n.
  Box split_part(int64_t dim, int64_t n, int64_t k) const;

  /// `[0:4, 2:8]` (numpy slice notation, half-open).
  std::string to_string() const;
  bool operator==(const Box&) const = default;
  size_t hash() const;

 private:
  IVec start_, end_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::Box> {
  size_t operator()(const heddle::Box& b) const { return b.hash(); }
};
