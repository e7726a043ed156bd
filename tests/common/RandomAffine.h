// A generator of small graphs whose middle op reads its input through a random affine projection:
// index sums (`x(i + t)`), negative coefficients (reversals), strides, offsets, a reduce dim or
// none, over extents chosen without regard to any mesh (so most meshes divide nothing). The
// general slicing tests run them partitioned and compare with the reference (docs/sharding.md).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "heddle/ir/TextParser.h"
#include "heddle/support/Assert.h"

namespace heddle::testing {

/// The text of one generated graph: `%a = tanh(%x)`, then `%y` reads `%a` through the random
/// projection (reduce_sum over a `t:sum` dim, or identity when there is none), then
/// `%z = tanh(%y)`. Every input read lies inside `%a` (no padding). Deterministic in `seed`.
inline std::string random_affine_text(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t out_rank = pick(1, 2);
  const bool reduce = pick(0, 2) > 0;
  std::vector<std::string> names = {"i", "j"};
  names.resize(static_cast<size_t>(out_rank));
  std::vector<int64_t> extents;
  for (int64_t k = 0; k < out_rank; ++k) extents.push_back(pick(2, 13));
  if (reduce) {
    names.push_back("t");
    extents.push_back(pick(2, 9));
  }
  const int64_t in_rank = out_rank;  // %a has one row per output dim
  const int64_t cols = static_cast<int64_t>(names.size());
  // Coefficients: row r always reads its own output dim (so each output dim is split somewhere),
  // with coefficient +-1..3; the other dims join with probability 1/2, -2..2.
  std::vector<std::vector<int64_t>> coef(static_cast<size_t>(in_rank),
                                         std::vector<int64_t>(static_cast<size_t>(cols), 0));
  for (int64_t r = 0; r < in_rank; ++r) {
    int64_t c = pick(1, 3) * (pick(0, 2) == 0 ? -1 : 1);
    coef[r][r] = c;
    for (int64_t k = 0; k < cols; ++k)
      if (k != r && pick(0, 1) == 0) coef[r][k] = pick(-2, 2);
  }
  if (reduce) {  // the reduce dim must reach %a somewhere
    bool reached = false;
    for (int64_t r = 0; r < in_rank; ++r) reached = reached || coef[r][cols - 1] != 0;
    if (!reached) coef[pick(0, in_rank - 1)][cols - 1] = pick(0, 1) ? 1 : -1;
  }
  std::vector<int64_t> shape;
  std::vector<std::string> rows;
  for (int64_t r = 0; r < in_rank; ++r) {
    int64_t lo = 0, hi = 0;
    for (int64_t k = 0; k < cols; ++k) {
      int64_t x = 0, y = coef[r][k] * (extents[k] - 1);
      lo += std::min(x, y);
      hi += std::max(x, y);
    }
    int64_t off = -lo + pick(0, 3);
    shape.push_back(hi + off + 1 + pick(0, 3));
    std::string row;
    for (int64_t k = 0; k < cols; ++k) {
      int64_t c = coef[r][k];
      if (c == 0) continue;
      int64_t mag = c < 0 ? -c : c;
      row += row.empty() ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
      row += (mag == 1 ? "" : std::to_string(mag) + "*") + names[k];
    }
    if (off > 0) row += " + " + std::to_string(off);
    if (off < 0) row += " - " + std::to_string(-off);
    rows.push_back(row);
  }
  auto list = [](const std::vector<std::string>& xs) {
    std::string s;
    for (size_t k = 0; k < xs.size(); ++k) s += (k ? ", " : "") + xs[k];
    return s;
  };
  auto dims = [](const std::vector<int64_t>& xs) {
    std::string s;
    for (size_t k = 0; k < xs.size(); ++k) s += (k ? ", " : "") + std::to_string(xs[k]);
    return s;
  };
  std::vector<std::string> out_names(names.begin(), names.begin() + out_rank);
  std::vector<int64_t> out_shape(extents.begin(), extents.begin() + out_rank);
  std::vector<std::string> a_names = {"p", "q"};
  a_names.resize(static_cast<size_t>(in_rank));
  std::string a_space, y_space, z_space;
  for (int64_t k = 0; k < in_rank; ++k)
    a_space += (k ? ", " : "") + a_names[k] + "=" + std::to_string(shape[k]);
  for (int64_t k = 0; k < cols; ++k)
    y_space += (k ? ", " : "") + names[k] + "=" + std::to_string(extents[k]) +
               (reduce && k == cols - 1 ? ":sum" : "");
  for (int64_t k = 0; k < out_rank; ++k)
    z_space += (k ? ", " : "") + names[k] + "=" + std::to_string(extents[k]);
  std::string text = "graph affine_" + std::to_string(seed) + " {\n";
  text += "  input %x: f32[" + dims(shape) + "]\n";
  text += "  %a: f32[" + dims(shape) + "] = tanh [" + a_space + "] %x(" + list(a_names) + ") -> (" +
          list(a_names) + ")\n";
  text += "  %y: f32[" + dims(out_shape) + "] = " + (reduce ? "reduce_sum" : "identity") + " [" +
          y_space + "] %a(" + list(rows) + ") -> (" + list(out_names) + ")\n";
  text += "  %z: f32[" + dims(out_shape) + "] = tanh [" + z_space + "] %y(" + list(out_names) +
          ") -> (" + list(out_names) + ")\n";
  text += "  output %z\n}\n";
  return text;
}

/// random_affine_text(seed) parsed. The result always passes verify().
inline Graph random_affine_graph(uint64_t seed) {
  auto g = parse_graph(random_affine_text(seed), "affine_" + std::to_string(seed));
  HEDDLE_ASSERT(g.ok()) << g.error().to_string() << "\n" << random_affine_text(seed);
  return std::move(*g);
}

}  // namespace heddle::testing
