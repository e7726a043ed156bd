#include "heddle/ir/IndexSpace.h"

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

std::string_view monoid_name(Monoid m) {
  switch (m) {
    case Monoid::kSum:
      return "sum";
    case Monoid::kMax:
      return "max";
    case Monoid::kMin:
      return "min";
  }
  HEDDLE_UNREACHABLE();
}

std::optional<Monoid> parse_monoid(std::string_view name) {
  if (name == "sum") return Monoid::kSum;
  if (name == "max") return Monoid::kMax;
  if (name == "min") return Monoid::kMin;
  return std::nullopt;
}

std::string IndexDim::to_string() const {
  std::string s = name + "=" + std::to_string(extent);
  if (reduce) s += ":" + std::string(monoid_name(*reduce));
  return s;
}

const IndexDim& IndexSpace::dim(int64_t i) const {
  HEDDLE_ASSERT(i >= 0 && i < rank()) << "dim " << i << " of " << to_string();
  return dims_[static_cast<size_t>(i)];
}

int64_t IndexSpace::find(std::string_view name) const {
  for (int64_t i = 0; i < rank(); ++i)
    if (dims_[i].name == name) return i;
  return -1;
}

std::vector<std::string> IndexSpace::names() const {
  std::vector<std::string> n;
  for (const auto& d : dims_) n.push_back(d.name);
  return n;
}

IVec IndexSpace::extents() const {
  std::vector<int64_t> e;
  for (const auto& d : dims_) e.push_back(d.extent);
  return IVec(std::move(e));
}

bool IndexSpace::has_reduce() const {
  for (const auto& d : dims_)
    if (d.is_reduce()) return true;
  return false;
}

std::string IndexSpace::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) s += (i ? ", " : "") + dims_[i].to_string();
  return s + "]";
}

size_t IndexSpace::hash() const {
  size_t h = dims_.size();
  for (const auto& d : dims_) {
    hash_combine(h, d.name);
    hash_combine(h, d.extent);
    hash_combine(h, d.reduce ? static_cast<int>(*d.reduce) : -1);
  }
  return h;
}

}  // namespace heddle
