#include "heddle/ir/AffineMap.h"

#include <algorithm>

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

AffineMap::AffineMap(int64_t in, std::vector<int64_t> matrix, IVec offset)
    : in_(in), a_(std::move(matrix)), offset_(std::move(offset)) {
  HEDDLE_ASSERT(in_ >= 0) << "negative input rank " << in_;
  HEDDLE_ASSERT(static_cast<int64_t>(a_.size()) == in_ * offset_.size())
      << "matrix has " << a_.size() << " entries, expected " << in_ << " x " << offset_.size();
}

AffineMap AffineMap::identity(int64_t n) {
  std::vector<int64_t> a(static_cast<size_t>(n * n), 0);
  for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i * n + i)] = 1;
  return AffineMap(n, std::move(a), IVec::zeros(n));
}

AffineMap AffineMap::from_rows(int64_t in, const std::vector<std::vector<int64_t>>& rows,
                               IVec offset) {
  std::vector<int64_t> a;
  for (const auto& r : rows) {
    HEDDLE_ASSERT(static_cast<int64_t>(r.size()) == in) << "row of " << r.size() << " != " << in;
    a.insert(a.end(), r.begin(), r.end());
  }
  return AffineMap(in, std::move(a), std::move(offset));
}

int64_t AffineMap::at(int64_t row, int64_t col) const {
  HEDDLE_ASSERT(row >= 0 && row < out_rank() && col >= 0 && col < in_)
      << "entry (" << row << ", " << col << ") of " << to_string();
  return a_[static_cast<size_t>(row * in_ + col)];
}

IVec AffineMap::column(int64_t col) const {
  std::vector<int64_t> c(static_cast<size_t>(out_rank()));
  for (int64_t r = 0; r < out_rank(); ++r) c[r] = at(r, col);
  return IVec(std::move(c));
}

IVec AffineMap::apply(const IVec& p) const {
  HEDDLE_ASSERT(p.size() == in_) << "point " << p.to_string() << " for map " << to_string();
  std::vector<int64_t> out(offset_.values());
  for (int64_t r = 0; r < out_rank(); ++r)
    for (int64_t c = 0; c < in_; ++c) out[r] += a_[r * in_ + c] * p[c];
  return IVec(std::move(out));
}

Box AffineMap::image(const Box& b) const {
  HEDDLE_ASSERT(b.rank() == in_) << "box " << b.to_string() << " for map " << to_string();
  if (b.empty()) return Box(offset_, offset_);
  std::vector<int64_t> lo(offset_.values()), hi(offset_.values());
  for (int64_t r = 0; r < out_rank(); ++r) {
    for (int64_t c = 0; c < in_; ++c) {
      int64_t a = a_[r * in_ + c];
      int64_t x = a * b.start()[c], y = a * (b.end()[c] - 1);
      lo[r] += std::min(x, y);
      hi[r] += std::max(x, y);
    }
    hi[r] += 1;
  }
  return Box(IVec(std::move(lo)), IVec(std::move(hi)));
}

AffineMap AffineMap::compose(const AffineMap& inner) const {
  HEDDLE_ASSERT(inner.out_rank() == in_)
      << "compose " << to_string() << " with " << inner.to_string();
  int64_t n = inner.in_rank();
  std::vector<int64_t> a(static_cast<size_t>(out_rank() * n), 0);
  for (int64_t r = 0; r < out_rank(); ++r)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t k = 0; k < in_; ++k) a[r * n + c] += at(r, k) * inner.at(k, c);
  IVec off = apply(inner.offset());
  return AffineMap(n, std::move(a), std::move(off));
}

std::string AffineMap::row_string(int64_t row, const std::vector<std::string>& names) const {
  HEDDLE_ASSERT(static_cast<int64_t>(names.size()) == in_) << "names for " << to_string();
  std::string s;
  for (int64_t c = 0; c < in_; ++c) {
    int64_t a = at(row, c);
    if (a == 0) continue;
    int64_t mag = a < 0 ? -a : a;
    if (s.empty())
      s += a < 0 ? "-" : "";
    else
      s += a < 0 ? " - " : " + ";
    if (mag != 1) s += std::to_string(mag) + "*";
    s += names[c];
  }
  int64_t b = offset_[row];
  if (s.empty()) return std::to_string(b);
  if (b > 0) s += " + " + std::to_string(b);
  if (b < 0) s += " - " + std::to_string(-b);
  return s;
}

std::string AffineMap::to_string() const {
  std::vector<std::string> names;
  for (int64_t c = 0; c < in_; ++c) names.push_back("d" + std::to_string(c));
  std::string s = "(";
  for (int64_t c = 0; c < in_; ++c) s += (c ? ", " : "") + names[c];
  s += ") -> (";
  for (int64_t r = 0; r < out_rank(); ++r) s += (r ? ", " : "") + row_string(r, names);
  return s + ")";
}

size_t AffineMap::hash() const {
  size_t h = static_cast<size_t>(in_);
  for (int64_t x : a_) hash_combine(h, x);
  hash_combine(h, offset_);
  return h;
}

}  // namespace heddle
