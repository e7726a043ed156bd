#include "heddle/ops/Tensor.h"

#include <algorithm>
#include <cstring>

#include "heddle/support/Assert.h"
#include "heddle/support/Numeric.h"

namespace heddle {

Tensor::Tensor(DType dtype, IVec shape, IVec origin)
    : dtype_(dtype), shape_(std::move(shape)), origin_(std::move(origin)) {
  if (origin_.empty()) origin_ = IVec::zeros(shape_.size());
  HEDDLE_ASSERT(origin_.size() == shape_.size())
      << "origin " << origin_.to_string() << " for shape " << shape_.to_string();
  strides_.assign(static_cast<size_t>(shape_.size()), 1);
  for (int64_t d = shape_.size() - 2; d >= 0; --d) strides_[d] = strides_[d + 1] * shape_[d + 1];
  for (int64_t s : shape_) HEDDLE_ASSERT(s >= 0) << "negative shape " << shape_.to_string();
  numel_ = shape_.product();
  if (is_int())
    i_.assign(static_cast<size_t>(numel_), 0);
  else
    f_.assign(static_cast<size_t>(numel_), 0.0f);
}

float* Tensor::f32() {
  HEDDLE_ASSERT(!is_int()) << "f32() of " << to_string();
  return f_.data();
}
const float* Tensor::f32() const {
  HEDDLE_ASSERT(!is_int()) << "f32() of " << to_string();
  return f_.data();
}
int64_t* Tensor::i64() {
  HEDDLE_ASSERT(is_int()) << "i64() of " << to_string();
  return i_.data();
}
const int64_t* Tensor::i64() const {
  HEDDLE_ASSERT(is_int()) << "i64() of " << to_string();
  return i_.data();
}

int64_t Tensor::offset(const IVec& p) const {
  HEDDLE_ASSERT(region().contains(p)) << p.to_string() << " outside " << to_string();
  int64_t o = 0;
  for (int64_t d = 0; d < rank(); ++d) o += strides_[d] * (p[d] - origin_[d]);
  return o;
}

double Tensor::at(const IVec& p) const {
  int64_t o = offset(p);
  return is_int() ? static_cast<double>(i_[o]) : static_cast<double>(f_[o]);
}

void Tensor::set(const IVec& p, double v) {
  int64_t o = offset(p);
  if (is_int())
    i_[o] = static_cast<int64_t>(v);
  else
    f_[o] = static_cast<float>(v);
}

void Tensor::fill(double v) {
  if (is_int())
    std::fill(i_.begin(), i_.end(), saturating_int64(v));
  else
    std::fill(f_.begin(), f_.end(), saturating_float(v));
}

void Tensor::copy_from(const Tensor& src) {
  HEDDLE_ASSERT(src.is_int() == is_int() && src.rank() == rank())
      << "copy " << src.to_string() << " into " << to_string();
  Box b = region().intersect(src.region());
  if (b.empty()) return;
  if (rank() == 0) {
    if (is_int())
      i_[0] = src.i_[0];
    else
      f_[0] = src.f_[0];
    return;
  }
  // Copy row by row; trailing dims that both tensors hold whole merge into one longer row (a
  // weight [CO, CI, 1, 1] is one row, not CO * CI rows of one element).
  const int64_t r = rank();
  const std::vector<int64_t>&start = b.start().values(), &end = b.end().values();
  const std::vector<int64_t>&dorg = origin_.values(), &sorg = src.origin_.values();
  const std::vector<int64_t>&dshape = shape_.values(), &sshape = src.shape_.values();
  int64_t inner = r - 1, n = end[r - 1] - start[r - 1];
  while (inner > 0) {
    int64_t e = end[inner] - start[inner];
    if (e != dshape[inner] || e != sshape[inner]) break;
    --inner;
    n *= end[inner] - start[inner];
  }
  std::vector<int64_t> p(start);
  const size_t width = is_int() ? sizeof(int64_t) : sizeof(float);
  auto* dbase = is_int() ? static_cast<void*>(i_.data()) : static_cast<void*>(f_.data());
  const auto* sbase = src.is_int() ? static_cast<const void*>(src.i_.data())
                                   : static_cast<const void*>(src.f_.data());
  while (true) {
    int64_t od = 0, os = 0;
    for (int64_t d = 0; d < r; ++d) {
      od += strides_[d] * (p[d] - dorg[d]);
      os += src.strides_[d] * (p[d] - sorg[d]);
    }
    std::memcpy(static_cast<char*>(dbase) + od * width,
                static_cast<const char*>(sbase) + os * width, width * n);
    int64_t d = inner - 1;
    for (; d >= 0; --d) {
      if (++p[d] < end[d]) break;
      p[d] = start[d];
    }
    if (d < 0) break;
  }
}

Tensor Tensor::crop(const Box& box) const {
  HEDDLE_ASSERT(region().contains(box)) << box.to_string() << " outside " << to_string();
  Tensor t = Tensor::tile(dtype_, box);
  t.copy_from(*this);
  return t;
}

std::string Tensor::to_string() const {
  std::string s = std::string(dtype_name(dtype_)) + shape_.to_string();
  if (origin_ != IVec::zeros(origin_.size())) s += " @ " + origin_.to_string();
  return s;
}

bool Tensor::operator==(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_ || origin_ != o.origin_) return false;
  if (is_int()) return i_ == o.i_;
  return f_.size() == o.f_.size() &&
         (f_.empty() || std::memcmp(f_.data(), o.f_.data(), f_.size() * sizeof(float)) == 0);
}

}  // namespace heddle
