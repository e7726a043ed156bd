// The row walk over the region two tiles share, for copies and combines between tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "heddle/ops/Tensor.h"

namespace heddle::kdetail {

/// Calls `row(dst_offset, src_offset, n)` for each row of `n` elements of the region that `dst`
/// and `src` (same rank) share, in row-major order, with the offsets into each tile's storage.
/// Rows run along the last dim (contiguous in both); trailing dims that both tiles hold whole
/// merge into one longer row (a weight [CO, CI, 1, 1] is one row, not CO * CI rows of one
/// element). Rank 0 is one row of one element; an empty intersection calls nothing. The
/// intersection and the row cursor live on the stack for ranks up to 8 (no allocation).
template <class F>
void for_each_shared_row(const Tensor& dst, const Tensor& src, F&& row) {
  const int64_t r = dst.rank();
  if (r == 0) {
    row(int64_t{0}, int64_t{0}, int64_t{1});
    return;
  }
  constexpr int64_t kStack = 8;
  int64_t stack[3 * kStack];
  std::vector<int64_t> heap;
  int64_t* lo = stack;
  if (r > kStack) {
    heap.resize(static_cast<size_t>(3 * r));
    lo = heap.data();
  }
  int64_t *hi = lo + r, *p = hi + r;
  const auto &ds = dst.strides(), &ss = src.strides();
  const IVec &dorg = dst.origin(), &sorg = src.origin(), &dsh = dst.shape(), &ssh = src.shape();
  for (int64_t d = 0; d < r; ++d) {
    lo[d] = std::max(dorg[d], sorg[d]);
    hi[d] = std::min(dorg[d] + dsh[d], sorg[d] + ssh[d]);
    if (hi[d] <= lo[d]) return;
    p[d] = lo[d];
  }
  int64_t inner = r - 1, n = hi[r - 1] - lo[r - 1];
  while (inner > 0) {
    int64_t e = hi[inner] - lo[inner];
    if (e != dsh[inner] || e != ssh[inner]) break;
    --inner;
    n *= hi[inner] - lo[inner];
  }
  while (true) {
    int64_t od = 0, os = 0;
    for (int64_t d = 0; d < r; ++d) {
      od += ds[d] * (p[d] - dorg[d]);
      os += ss[d] * (p[d] - sorg[d]);
    }
    row(od, os, n);
    int64_t d = inner - 1;
    for (; d >= 0; --d) {
      if (++p[d] < hi[d]) break;
      p[d] = lo[d];
    }
    if (d < 0) return;
  }
}

}  // namespace heddle::kdetail
