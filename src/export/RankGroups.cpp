#include "heddle/export/RankGroups.h"

#include <algorithm>
#include <array>

namespace heddle::exporting {

namespace {

using Groups = std::vector<std::vector<int64_t>>;

// The groups of axis `axis` of a row-major grid with `dims` (outermost first): the ranks that
// differ only in that axis's coordinate.
Groups axis_groups(const std::vector<int64_t>& dims, size_t axis, int64_t base) {
  int64_t total = 1, inner = 1;
  for (int64_t d : dims) total *= d;
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  const int64_t n = dims[axis];
  Groups out;
  for (int64_t start = 0; start < total; ++start) {
    if ((start / inner) % n != 0) continue;  // not the first member of its group
    std::vector<int64_t> g;
    for (int64_t i = 0; i < n; ++i) g.push_back(base + start + i * inner);
    out.push_back(std::move(g));
  }
  return out;
}

void append(Groups& to, Groups from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

std::map<std::string, Groups> rank_groups(const StrategySpec& spec) {
  std::map<std::string, Groups> out;
  if (spec.heterogeneous()) {
    int64_t base = 0;
    for (const auto& m : spec.meshes) {
      std::vector<int64_t> dims = {m.dp, m.tp};
      std::vector<int64_t> stage;
      for (int64_t r = 0; r < m.dp * m.tp; ++r) stage.push_back(base + r);
      out["stages"].push_back(std::move(stage));
      if (m.dp > 1) append(out["dp"], axis_groups(dims, 0, base));
      if (m.tp > 1) append(out["tp"], axis_groups(dims, 1, base));
      base += m.dp * m.tp;
    }
    return out;
  }
  int64_t dp = spec.dp.value_or(1), tp = spec.tp.value_or(1);
  if (!spec.meshes.empty()) dp = spec.meshes.front().dp, tp = spec.meshes.front().tp;
  const std::array<std::pair<const char*, int64_t>, 5> axes = {{{"pp", spec.pp.value_or(1)},
                                                                {"dp", dp},
                                                                {"ep", spec.ep.value_or(1)},
                                                                {"cp", spec.cp.value_or(1)},
                                                                {"tp", tp}}};
  std::vector<int64_t> dims;
  for (const auto& [name, n] : axes) dims.push_back(n);
  for (size_t a = 0; a < axes.size(); ++a)
    if (axes[a].second > 1) {
      Groups g = axis_groups(dims, a, 0);
      std::sort(g.begin(), g.end());
      out[axes[a].first] = std::move(g);
    }
  return out;
}

}  // namespace heddle::exporting
