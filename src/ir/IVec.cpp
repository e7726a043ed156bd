#include "heddle/ir/IVec.h"

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

IVec IVec::filled(int64_t n, int64_t value) {
  HEDDLE_ASSERT(n >= 0) << "negative IVec size " << n;
  return IVec(std::vector<int64_t>(static_cast<size_t>(n), value));
}

int64_t IVec::operator[](int64_t i) const {
  HEDDLE_ASSERT(i >= 0 && i < size()) << "index " << i << " out of range for " << to_string();
  return v_[static_cast<size_t>(i)];
}

IVec IVec::with(int64_t i, int64_t value) const {
  HEDDLE_ASSERT(i >= 0 && i < size()) << "index " << i << " out of range for " << to_string();
  IVec r = *this;
  r.v_[static_cast<size_t>(i)] = value;
  return r;
}

int64_t IVec::product() const {
  int64_t p = 1;
  for (int64_t x : v_) p *= x;
  return p;
}

int64_t IVec::sum() const {
  int64_t s = 0;
  for (int64_t x : v_) s += x;
  return s;
}

IVec IVec::operator+(const IVec& o) const {
  HEDDLE_ASSERT(size() == o.size()) << to_string() << " + " << o.to_string();
  IVec r = *this;
  for (size_t i = 0; i < v_.size(); ++i) r.v_[i] += o.v_[i];
  return r;
}

IVec IVec::operator-(const IVec& o) const {
  HEDDLE_ASSERT(size() == o.size()) << to_string() << " - " << o.to_string();
  IVec r = *this;
  for (size_t i = 0; i < v_.size(); ++i) r.v_[i] -= o.v_[i];
  return r;
}

std::string IVec::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < v_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v_[i]);
  }
  return s + "]";
}

size_t IVec::hash() const {
  size_t h = v_.size();
  for (int64_t x : v_) hash_combine(h, x);
  return h;
}

}  // namespace heddle
