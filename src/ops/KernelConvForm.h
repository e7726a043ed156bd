// Private helpers shared by the convolution and pooling kernels (im2col + sgemm and oneDNN):
// rank-4 tiles in global coordinates, the op's named index dims and the projection-form checks
// that let a kernel read strides, padding and dilation off the operands.
#pragma once

#include <string_view>
#include <vector>

#include "KernelUtil.h"

namespace heddle::kdetail::convform {

// A rank-4 float tile addressed in global coordinates.
struct Tile4 {
  float* data = nullptr;
  int64_t org[4] = {0, 0, 0, 0}, ext[4] = {0, 0, 0, 0}, st[4] = {0, 0, 0, 0};

  explicit Tile4(const Tensor& t) : data(const_cast<float*>(t.f32())) {
    for (int d = 0; d < 4; ++d) {
      org[d] = t.origin()[d];
      ext[d] = t.shape()[d];
      st[d] = t.strides()[d];
    }
  }
  // Offset of (a, b, c, e); c and e may lie outside the tile (callers test before reading).
  int64_t off(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return (a - org[0]) * st[0] + (b - org[1]) * st[1] + (c - org[2]) * st[2] +
           (e - org[3]) * st[3];
  }
  bool in_h(int64_t h) const { return h >= org[2] && h < org[2] + ext[2]; }
  bool in_w(int64_t w) const { return w >= org[3] && w < org[3] + ext[3]; }
};

// A half-open range of one index dim of the box; dims the op lacks (no groups) are [0, 1).
struct Range {
  int64_t lo = 0, hi = 1;
  int64_t size() const { return hi - lo; }
};

struct Dims {
  std::vector<int64_t> pos;  // index-dim positions by name order given; -1 when absent
  bool ok = true;
  Dims(const Op& op, std::initializer_list<const char*> names, const char* optional) {
    for (const char* n : names) {
      int64_t k = op.space.find(n);
      if (k < 0 && std::string_view(n) != optional) ok = false;
      pos.push_back(k);
    }
  }
  Range range(const Box& b, size_t i) const {
    return pos[i] < 0 ? Range{} : Range{b.start()[pos[i]], b.end()[pos[i]]};
  }
};

// Strides, leading padding and dilations of the two spatial dims.
struct Geom {
  int64_t s0 = 1, s1 = 1, p0 = 0, p1 = 0, d0 = 1, d1 = 1;
  // From the attributes (what the direct gradient loops use too).
  explicit Geom(const Op& op) {
    auto st = attr_ints(op, "stride", {1, 1});
    auto pad = attr_ints(op, "padding", {0, 0, 0, 0});
    auto dil = attr_ints(op, "dilation", {1, 1});
    if (st.size() != 2 || pad.size() < 2 || dil.size() != 2) return;
    s0 = st[0];
    s1 = st[1];
    p0 = pad[0];
    p1 = pad[1];
    d0 = dil[0];
    d1 = dil[1];
  }
};

// One term of a projection row: index dim `dim` (-1: absent, skipped) with coefficient `coef`.
struct Term {
  int64_t dim, coef;
};

// True when row `row` of `o`'s map is exactly `terms` (every other coefficient zero) plus
// `offset`, with window `window` on that row.
inline bool row_is(const Operand& o, int64_t row, std::initializer_list<Term> terms,
                   int64_t offset = 0, int64_t window = 1) {
  const AffineMap& m = o.proj.map();
  if (m.out_rank() != 4 || m.offset()[row] != offset || o.proj.window()[row] != window)
    return false;
  std::vector<int64_t> want(static_cast<size_t>(m.in_rank()), 0);
  for (Term t : terms)
    if (t.dim >= 0) want[t.dim] = t.coef;
  for (int64_t k = 0; k < m.in_rank(); ++k)
    if (m.at(row, k) != want[k]) return false;
  return true;
}

// The coefficient of index dim `dim` in row `row` of `o`'s map (0 when dim < 0).
inline int64_t coef(const Operand& o, int64_t row, int64_t dim) {
  return dim < 0 ? 0 : o.proj.map().at(row, dim);
}

}  // namespace heddle::kdetail::convform
