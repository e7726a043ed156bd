// AffineMap: x -> A x + b over integer vectors, A an [out x in] matrix. Index projections and
// reindexings are built from it.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Box.h"
#include "heddle/ir/IVec.h"

namespace heddle {

/// An immutable integer affine map from Z^in to Z^out.
class AffineMap {
 public:
  AffineMap() = default;
  /// `matrix` is row-major [out x in]. Precondition: matrix.size() == out * in,
  /// offset.size() == out, in >= 0.
  AffineMap(int64_t in, std::vector<int64_t> matrix, IVec offset);
  /// The identity on Z^n.
  static AffineMap identity(int64_t n);
  /// Rows given as vectors of coefficients, plus an offset. Precondition: each row has `in`
  /// entries.
  static AffineMap from_rows(int64_t in, const std::vector<std::vector<int64_t>>& rows,
                             IVec offset);

  int64_t in_rank() const { return in_; }
  int64_t out_rank() const { return offset_.size(); }
  /// Coefficient A[row][col]. Precondition: in range.
  int64_t at(int64_t row, int64_t col) const;
  const IVec& offset() const { return offset_; }
  /// Column `col` of A. Precondition: 0 <= col < in_rank().
  IVec column(int64_t col) const;

  /// A p + b. Precondition: p.size() == in_rank().
  IVec apply(const IVec& p) const;
  /// The smallest box holding the image of every point of `b` (exact for any signs in A): per
  /// output dim, the sum over input dims of min/max of A_ji * start_i and A_ji * (end_i - 1),
  /// plus b_j; the upper end is exclusive. An empty `b` maps to an empty box.
  /// Precondition: b.rank() == in_rank().
  Box image(const Box& b) const;
  /// this o inner: p -> A (A' p + b') + b. Precondition: inner.out_rank() == in_rank().
  AffineMap compose(const AffineMap& inner) const;

  /// `(d0, d1) -> (d0, 2*d1 - 1)`.
  std::string to_string() const;
  /// Output row `row` as an expression over `names` (one per input dim): `2*oh - 1`, `0`.
  /// Precondition: names.size() == in_rank().
  std::string row_string(int64_t row, const std::vector<std::string>& names) const;
  bool operator==(const AffineMap&) const = default;
  size_t hash() const;

 private:
  int64_t in_ = 0;
  std::vector<int64_t> a_;  // row-major [out x in]
  IVec offset_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::AffineMap> {
  size_t operator()(const heddle::AffineMap& m) const { return m.hash(); }
};
