// IndexSpace: the named dims an op iterates over, each `parallel` or `reduce(sum|max|min)`,
// printed as `[m=128, n=64, k=256:sum]`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/Box.h"

namespace heddle {

/// How a reduce dim combines partial results.
enum class Monoid : uint8_t { kSum, kMax, kMin };

/// `sum`, `max`, `min`.
std::string_view monoid_name(Monoid m);
/// Parses `sum`, `max`, `min`.
std::optional<Monoid> parse_monoid(std::string_view name);

/// One dim of an index space.
struct IndexDim {
  std::string name;
  int64_t extent = 1;
  std::optional<Monoid> reduce;  ///< nullopt: parallel

  bool is_reduce() const { return reduce.has_value(); }
  /// `m=128` or `k=256:sum`.
  std::string to_string() const;
  bool operator==(const IndexDim&) const = default;
};

/// An immutable list of index dims. Names are unique and extents >= 0 for spaces that passed the
/// verifier; the type itself does not enforce it so the verifier can report violations.
class IndexSpace {
 public:
  IndexSpace() = default;
  explicit IndexSpace(std::vector<IndexDim> dims) : dims_(std::move(dims)) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  const std::vector<IndexDim>& dims() const { return dims_; }
  /// Dim `i`. Precondition: 0 <= i < rank().
  const IndexDim& dim(int64_t i) const;
  /// The position of the dim called `name`, or -1.
  int64_t find(std::string_view name) const;
  /// The dims' names, in order.
  std::vector<std::string> names() const;
  /// The extents, in order.
  IVec extents() const;
  /// The whole space `[0, extents)`. Precondition: extents >= 0.
  Box box() const { return Box::of_shape(extents()); }
  /// Number of index points (1 for a 0-d space).
  int64_t volume() const { return extents().product(); }
  /// True when some dim reduces.
  bool has_reduce() const;

  /// `[m=128, n=64, k=256:sum]`.
  std::string to_string() const;
  bool operator==(const IndexSpace&) const = default;
  size_t hash() const;

 private:
  std::vector<IndexDim> dims_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::IndexSpace> {
  size_t operator()(const heddle::IndexSpace& s) const { return s.hash(); }
};
