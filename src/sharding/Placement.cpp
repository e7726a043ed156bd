#include "heddle/sharding/Placement.h"

#include <algorithm>

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Strings.h"

namespace heddle {

Placement Placement::shard(int64_t dim) {
  HEDDLE_ASSERT(dim >= 0) << "shard dim " << dim;
  Placement p;
  p.kind_ = Kind::kShard;
  p.dim_ = dim;
  return p;
}

Placement Placement::partial(Monoid monoid) {
  Placement p;
  p.kind_ = Kind::kPartial;
  p.monoid_ = monoid;
  return p;
}

int64_t Placement::dim() const {
  HEDDLE_ASSERT(is_shard()) << to_string() << " has no dim";
  return dim_;
}

Monoid Placement::monoid() const {
  HEDDLE_ASSERT(is_partial()) << to_string() << " has no monoid";
  return monoid_;
}

std::string Placement::to_string() const {
  switch (kind_) {
    case Kind::kReplicate:
      return "Replicate";
    case Kind::kShard:
      return "Shard(" + std::to_string(dim_) + ")";
    case Kind::kPartial:
      return "Partial(" + std::string(monoid_name(monoid_)) + ")";
  }
  HEDDLE_UNREACHABLE();
}

TensorSharding TensorSharding::replicated(int64_t rank) {
  return TensorSharding(std::vector<Placement>(static_cast<size_t>(rank)));
}

const Placement& TensorSharding::at(int64_t a) const {
  HEDDLE_ASSERT(a >= 0 && a < rank()) << "axis " << a << " of " << to_string();
  return p_[static_cast<size_t>(a)];
}

TensorSharding TensorSharding::with(int64_t a, Placement p) const {
  HEDDLE_ASSERT(a >= 0 && a < rank()) << "axis " << a << " of " << to_string();
  TensorSharding s = *this;
  s.p_[static_cast<size_t>(a)] = p;
  return s;
}

bool TensorSharding::has_partial() const {
  for (const auto& p : p_)
    if (p.is_partial()) return true;
  return false;
}

std::vector<int64_t> TensorSharding::axes_sharding(int64_t d) const {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < rank(); ++a)
    if (p_[a].is_shard() && p_[a].dim() == d) axes.push_back(a);
  return axes;
}

int64_t TensorSharding::shards_of_dim(int64_t d, const Mesh& mesh) const {
  int64_t n = 1;
  for (int64_t a : axes_sharding(d)) n *= mesh.size(a);
  return n;
}

Box block_of(int64_t extent, int64_t n, int64_t k) {
  return Box(IVec{0}, IVec{extent}).split_part(0, n, k);
}

Box TensorSharding::local_box(const IVec& shape, const Mesh& mesh, int64_t device) const {
  HEDDLE_ASSERT(mesh.rank() == rank()) << to_string() << " on mesh " << mesh.to_string();
  for (const auto& p : p_)
    HEDDLE_ASSERT(!p.is_shard() || p.dim() < shape.size())
        << to_string() << " shards a dim beyond shape " << shape.to_string();
  // Instantiating programs calls this for every instruction of every device: no boxes per dim.
  IVec c = mesh.coords(device);
  std::vector<int64_t> s(static_cast<size_t>(shape.size()), 0), e(shape.values());
  for (int64_t d = 0; d < shape.size(); ++d) {
    int64_t n = 1, k = 0;
    for (int64_t a = 0; a < rank(); ++a)  // major to minor: mixed-radix block index
      if (p_[a].is_shard() && p_[a].dim() == d) {
        n *= mesh.size(a);
        k = k * mesh.size(a) + c[a];
      }
    if (n == 1) continue;
    int64_t chunk = (shape[d] + n - 1) / n;  // as block_of(shape[d], n, k)
    s[d] = std::min(k * chunk, shape[d]);
    e[d] = std::min(s[d] + chunk, shape[d]);
  }
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

IVec TensorSharding::local_shape(const IVec& shape, const Mesh& mesh) const {
  std::vector<int64_t> s(shape.values());
  for (int64_t d = 0; d < shape.size(); ++d) {
    int64_t n = shards_of_dim(d, mesh);
    s[d] = (shape[d] + n - 1) / n;
  }
  return IVec(std::move(s));
}

bool TensorSharding::blocks_nest(const IVec& shape, const Mesh& mesh) const {
  auto ceil_div = [](int64_t p, int64_t q) { return (p + q - 1) / q; };
  for (int64_t d = 0; d < shape.size(); ++d) {
    int64_t coarse = 1;
    for (int64_t a : axes_sharding(d)) {
      int64_t fine = coarse * mesh.size(a);
      if (coarse > 1 && ceil_div(shape[d], coarse) != mesh.size(a) * ceil_div(shape[d], fine))
        return false;
      coarse = fine;
    }
  }
  return true;
}

std::string TensorSharding::to_string() const {
  std::vector<std::string> parts;
  for (const auto& p : p_) parts.push_back(p.to_string());
  return "[" + join(parts, ", ") + "]";
}

size_t TensorSharding::hash() const {
  size_t h = p_.size();
  for (const auto& p : p_) {
    hash_combine(h, static_cast<int>(p.kind()));
    if (p.is_shard()) hash_combine(h, p.dim());
    if (p.is_partial()) hash_combine(h, static_cast<int>(p.monoid()));
  }
  return h;
}

}  // namespace heddle
