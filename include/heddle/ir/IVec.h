// IVec: an immutable integer vector, the coordinates of index points, shapes and offsets.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace heddle {

/// A small immutable vector of signed 64-bit integers.
class IVec {
 public:
  IVec() = default;
  IVec(std::initializer_list<int64_t> v) : v_(v) {}
  explicit IVec(std::vector<int64_t> v) : v_(std::move(v)) {}
  /// `n` copies of `value`. Precondition: n >= 0.
  static IVec filled(int64_t n, int64_t value);
  static IVec zeros(int64_t n) { return filled(n, 0); }
  static IVec ones(int64_t n) { return filled(n, 1); }

  int64_t size() const { return static_cast<int64_t>(v_.size()); }
  bool empty() const { return v_.empty(); }
  /// Element `i`. Precondition: 0 <= i < size().
  int64_t operator[](int64_t i) const;
  const std::vector<int64_t>& values() const { return v_; }
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }

  /// A copy with element `i` replaced by `value`. Precondition: 0 <= i < size().
  IVec with(int64_t i, int64_t value) const;
  /// Product of the elements (1 for the empty vector).
  int64_t product() const;
  /// Sum of the elements.
  int64_t sum() const;

  /// Elementwise arithmetic. Precondition: equal sizes.
  IVec operator+(const IVec& o) const;
  IVec operator-(const IVec& o) const;

  /// `[1, 2, 3]`.
  std::string to_string() const;
  bool operator==(const IVec&) const = default;
  auto operator<=>(const IVec&) const = default;
  size_t hash() const;

 private:
  std::vector<int64_t> v_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::IVec> {
  size_t operator()(const heddle::IVec& v) const { return v.hash(); }
};
