#include "heddle/ir/Box.h"

#include <algorithm>

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

Box::Box(IVec start, IVec end) : start_(std::move(start)), end_(std::move(end)) {
  HEDDLE_ASSERT(start_.size() == end_.size())
      << "box rank mismatch " << start_.to_string() << " " << end_.to_string();
  for (int64_t i = 0; i < start_.size(); ++i)
    HEDDLE_ASSERT(start_[i] <= end_[i])
        << "box start " << start_.to_string() << " beyond end " << end_.to_string();
}

Box Box::of_shape(const IVec& shape) { return Box(IVec::zeros(shape.size()), shape); }

bool Box::empty() const {
  for (int64_t i = 0; i < rank(); ++i)
    if (start_[i] == end_[i]) return true;
  return false;
}

bool Box::contains(const IVec& p) const {
  HEDDLE_ASSERT(p.size() == rank()) << "point " << p.to_string() << " vs box " << to_string();
  for (int64_t i = 0; i < rank(); ++i)
    if (p[i] < start_[i] || p[i] >= end_[i]) return false;
  return true;
}

bool Box::contains(const Box& b) const {
  HEDDLE_ASSERT(b.rank() == rank()) << "box " << b.to_string() << " vs box " << to_string();
  if (b.empty()) return true;
  for (int64_t i = 0; i < rank(); ++i)
    if (b.start_[i] < start_[i] || b.end_[i] > end_[i]) return false;
  return true;
}

Box Box::intersect(const Box& b) const {
  HEDDLE_ASSERT(b.rank() == rank()) << "box " << b.to_string() << " vs box " << to_string();
  std::vector<int64_t> s(rank()), e(rank());
  for (int64_t i = 0; i < rank(); ++i) {
    s[i] = std::max(start_[i], b.start_[i]);
    e[i] = std::max(s[i], std::min(end_[i], b.end_[i]));
  }
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

Box Box::translate(const IVec& offset) const { return Box(start_ + offset, end_ + offset); }

Box Box::split_part(int64_t dim, int64_t n, int64_t k) const {
  HEDDLE_ASSERT(dim >= 0 && dim < rank()) << "split dim " << dim << " of " << to_string();
  HEDDLE_ASSERT(n >= 1 && k >= 0 && k < n) << "split part " << k << " of " << n;
  int64_t extent = end_[dim] - start_[dim];
  int64_t chunk = (extent + n - 1) / n;
  int64_t s = std::min(start_[dim] + k * chunk, end_[dim]);
  int64_t e = std::min(s + chunk, end_[dim]);
  return Box(start_.with(dim, s), end_.with(dim, e));
}

std::vector<Box> Box::split(int64_t dim, int64_t n) const {
  std::vector<Box> parts;
  parts.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) parts.push_back(split_part(dim, n, k));
  return parts;
}

std::string Box::to_string() const {
  std::string s = "[";
  for (int64_t i = 0; i < rank(); ++i) {
    if (i) s += ", ";
    s += std::to_string(start_[i]) + ":" + std::to_string(end_[i]);
  }
  return s + "]";
}

size_t Box::hash() const {
  size_t h = start_.hash();
  hash_combine(h, end_);
  return h;
}

}  // namespace heddle
