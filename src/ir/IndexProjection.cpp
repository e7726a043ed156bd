#include "heddle/ir/IndexProjection.h"

#include <algorithm>

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

IndexProjection::IndexProjection(AffineMap map, IVec window)
    : map_(std::move(map)), window_(std::move(window)) {
  HEDDLE_ASSERT(window_.size() == map_.out_rank())
      << "window " << window_.to_string() << " for map " << map_.to_string();
  for (int64_t w : window_) HEDDLE_ASSERT(w >= 0) << "negative window " << window_.to_string();
}

IndexProjection::IndexProjection(AffineMap map)
    : IndexProjection(map, IVec::ones(map.out_rank())) {}

Box IndexProjection::window_at(const IVec& p) const {
  IVec s = map_.apply(p);
  return Box(s, s + window_);
}

Box IndexProjection::image(const Box& b) const {
  Box m = map_.image(b);
  if (m.empty()) return m;
  // m.end is max + 1; the last window ends at max + window.
  return Box(m.start(), m.end() + window_ - IVec::ones(window_.size()));
}

IndexProjection IndexProjection::compose(const AffineMap& inner) const {
  return IndexProjection(map_.compose(inner), window_);
}

IVec IndexProjection::marginal_overlap(int64_t i) const {
  HEDDLE_ASSERT(i >= 0 && i < index_rank()) << "index dim " << i << " of " << to_string();
  std::vector<int64_t> o(static_cast<size_t>(tensor_rank()), 0);
  for (int64_t j = 0; j < tensor_rank(); ++j) {
    int64_t a = map_.at(j, i);
    int64_t step = a < 0 ? -a : a;
    o[j] = std::max<int64_t>(window_[j] - step, 0);
  }
  return IVec(std::move(o));
}

std::string IndexProjection::to_string(const std::vector<std::string>& names) const {
  std::string s = "(";
  for (int64_t r = 0; r < tensor_rank(); ++r) s += (r ? ", " : "") + map_.row_string(r, names);
  s += ")";
  bool unit = std::all_of(window_.begin(), window_.end(), [](int64_t w) { return w == 1; });
  if (!unit) s += window_.to_string();
  return s;
}

std::string IndexProjection::to_string() const {
  std::vector<std::string> names;
  for (int64_t c = 0; c < index_rank(); ++c) names.push_back("d" + std::to_string(c));
  return to_string(names);
}

size_t IndexProjection::hash() const {
  size_t h = map_.hash();
  hash_combine(h, window_);
  return h;
}

}  // namespace heddle
