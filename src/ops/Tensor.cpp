#include "heddle/ops/Tensor.h"

#include <algorithm>
#include <cstring>

#include "SharedRows.h"
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
  point_at_owned();
}

void Tensor::point_at_owned() {
  view_ = false;
  fp_ = is_int() ? nullptr : f_.data();
  ip_ = is_int() ? i_.data() : nullptr;
}

Tensor::Tensor(const Tensor& o)
    : dtype_(o.dtype_),
      shape_(o.shape_),
      origin_(o.origin_),
      strides_(o.strides_),
      numel_(o.numel_) {
  if (o.fp_) f_.assign(o.fp_, o.fp_ + o.stored());
  if (o.ip_) i_.assign(o.ip_, o.ip_ + o.stored());
  if (o.fp_ || o.ip_) point_at_owned();
}

Tensor::Tensor(Tensor&& o) noexcept
    : dtype_(o.dtype_),
      shape_(std::move(o.shape_)),
      origin_(std::move(o.origin_)),
      strides_(std::move(o.strides_)),
      numel_(o.numel_),
      f_(std::move(o.f_)),
      i_(std::move(o.i_)),
      fp_(o.fp_),
      ip_(o.ip_),
      view_(o.view_) {
  o.fp_ = nullptr;
  o.ip_ = nullptr;
  o.view_ = false;
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (this == &o) return *this;
  dtype_ = o.dtype_;
  shape_ = o.shape_;
  origin_ = o.origin_;
  strides_ = o.strides_;
  numel_ = o.numel_;
  // assign() keeps the capacity, so re-assigning a tensor of the same size allocates nothing.
  if (o.fp_)
    f_.assign(o.fp_, o.fp_ + o.stored());
  else
    f_.clear();
  if (o.ip_)
    i_.assign(o.ip_, o.ip_ + o.stored());
  else
    i_.clear();
  if (o.fp_ || o.ip_) {
    point_at_owned();
  } else {
    fp_ = nullptr;
    ip_ = nullptr;
    view_ = false;
  }
  return *this;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this == &o) return *this;
  dtype_ = o.dtype_;
  shape_ = std::move(o.shape_);
  origin_ = std::move(o.origin_);
  strides_ = std::move(o.strides_);
  numel_ = o.numel_;
  f_ = std::move(o.f_);
  i_ = std::move(o.i_);
  fp_ = o.fp_;
  ip_ = o.ip_;
  view_ = o.view_;
  o.fp_ = nullptr;
  o.ip_ = nullptr;
  o.view_ = false;
  return *this;
}

Tensor Tensor::view(DType dtype, const Box& region, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = region.shape();
  t.origin_ = region.start();
  t.strides_.assign(static_cast<size_t>(t.shape_.size()), 1);
  for (int64_t d = t.shape_.size() - 2; d >= 0; --d)
    t.strides_[d] = t.strides_[d + 1] * t.shape_[d + 1];
  t.numel_ = t.shape_.product();
  t.view_ = true;
  t.rebind(data);
  return t;
}

void Tensor::rebind(void* data) {
  HEDDLE_ASSERT(view_) << "rebind() of an owning tensor " << to_string();
  fp_ = is_int() ? nullptr : static_cast<float*>(data);
  ip_ = is_int() ? static_cast<int64_t*>(data) : nullptr;
}

float* Tensor::f32() {
  HEDDLE_ASSERT(!is_int()) << "f32() of " << to_string();
  return fp_;
}
const float* Tensor::f32() const {
  HEDDLE_ASSERT(!is_int()) << "f32() of " << to_string();
  return fp_;
}
int64_t* Tensor::i64() {
  HEDDLE_ASSERT(is_int()) << "i64() of " << to_string();
  return ip_;
}
const int64_t* Tensor::i64() const {
  HEDDLE_ASSERT(is_int()) << "i64() of " << to_string();
  return ip_;
}

int64_t Tensor::offset(const IVec& p) const {
  HEDDLE_ASSERT(region().contains(p)) << p.to_string() << " outside " << to_string();
  int64_t o = 0;
  for (int64_t d = 0; d < rank(); ++d) o += strides_[d] * (p[d] - origin_[d]);
  return o;
}

double Tensor::at(const IVec& p) const {
  int64_t o = offset(p);
  return is_int() ? static_cast<double>(ip_[o]) : static_cast<double>(fp_[o]);
}

void Tensor::set(const IVec& p, double v) {
  int64_t o = offset(p);
  if (is_int())
    ip_[o] = static_cast<int64_t>(v);
  else
    fp_[o] = static_cast<float>(v);
}

void Tensor::fill(double v) {
  if (is_int())
    std::fill(ip_, ip_ + stored(), saturating_int64(v));
  else
    std::fill(fp_, fp_ + stored(), saturating_float(v));
}

void Tensor::copy_from(const Tensor& src) {
  HEDDLE_ASSERT(src.is_int() == is_int() && src.rank() == rank())
      << "copy " << src.to_string() << " into " << to_string();
  // A tile onto itself (an executor's output computed in place in its destination): no copy.
  if ((is_int() ? static_cast<const void*>(ip_) == src.ip_ : fp_ == src.fp_) &&
      origin_ == src.origin_ && shape_ == src.shape_)
    return;
  if (is_int())
    kdetail::for_each_shared_row(*this, src, [&](int64_t od, int64_t os, int64_t n) {
      std::memmove(ip_ + od, src.ip_ + os, sizeof(int64_t) * n);
    });
  else
    kdetail::for_each_shared_row(*this, src, [&](int64_t od, int64_t os, int64_t n) {
      std::memmove(fp_ + od, src.fp_ + os, sizeof(float) * n);
    });
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
  if (stored() != o.stored()) return false;
  if (stored() == 0) return true;
  if (is_int()) return std::equal(ip_, ip_ + stored(), o.ip_);
  return std::memcmp(fp_, o.fp_, stored() * sizeof(float)) == 0;
}

}  // namespace heddle
