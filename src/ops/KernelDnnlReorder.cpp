// Reorders between oneDNN's layouts by own loops. A layout whose dims carry at most one inner
// block each addresses element (i0, i1, i2, i3) at f0(i0) + f1(i1) + f2(i2) + f3(i3), one term per
// dim (dims that both layouts store as one, like a weight's taps, merged). A copy walks the dims
// densest in the source and in the destination in 16 x 16 tiles, transposed in 4 x 4 blocks
// through SSE registers, with the other dims looped fastest outside them (so consecutive tiles
// reuse the lines the last one read), split over the threads. Inside a block each term is affine,
// so a tile that crosses no block edge is a strided transpose; the rest goes element by element.
#include "KernelDnnlReorder.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace heddle::kdetail {

namespace {

constexpr int kRank = 4;
constexpr int64_t kTile = 16;
// Copies under this many elements run on the calling thread: a parallel region's wake-up and
// barrier cost more than the second thread saves.
constexpr int64_t kParallelMin = int64_t{1} << 16;

// One dim of a layout: index i of n sits at (i / block) * outer + (i % block) * unit.
struct Dim {
  int64_t n = 1, block = 1, outer = 0, unit = 0;
  int64_t size() const { return n; }
  int64_t at(int64_t i) const {
    return block == 1 ? i * outer : (i / block) * outer + (i % block) * unit;
  }
  // The offsets of [lo, hi) are at(lo) + (i - lo) * step().
  bool affine(int64_t lo, int64_t hi) const {
    return block == 1 || lo / block == (hi - 1) / block || outer == block * unit;
  }
  int64_t step() const { return block > 1 ? unit : outer; }
  // The end of the block that holds index i (n when the dim is not blocked).
  int64_t block_end(int64_t i) const {
    return block == 1 || outer == block * unit ? n : std::min(n, (i / block + 1) * block);
  }
};

using Layout = std::vector<Dim>;

// The dims of `d`, or nullopt when it is not a 4-d f32 blocked layout with at most one inner
// block per dim and no offsets.
std::optional<Layout> layout(const dnnl_memory_desc_t& d) {
  if (d.ndims != kRank || d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked ||
      d.extra.flags != 0 || d.offset0 != 0)
    return std::nullopt;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  Layout l(kRank);
  int64_t step = 1;
  for (int j = b.inner_nblks - 1; j >= 0; --j) {  // innermost block first
    const int k = static_cast<int>(b.inner_idxs[j]);
    if (k < 0 || k >= kRank || l[k].block != 1) return std::nullopt;
    l[k].block = b.inner_blks[j];
    l[k].unit = step;
    step *= b.inner_blks[j];
  }
  for (int k = 0; k < kRank; ++k) {
    if (d.padded_offsets[k] != 0 || d.dims[k] <= 0) return std::nullopt;
    l[k].n = d.dims[k];
    l[k].outer = b.strides[k];
  }
  return l;
}

// Merges dims k and k + 1 of `a` and `b` wherever both lay them out as one unblocked dim (the
// 3 x 3 taps of a weight in `abcd` and in `ABcd16b16a`), so a tile spans them.
void merge(Layout& a, Layout& b) {
  auto joins = [](const Layout& l, size_t k) {
    const Dim &x = l[k], &y = l[k + 1];
    return x.block == 1 && y.block == 1 && x.outer == y.size() * y.outer;
  };
  for (size_t k = a.size() - 1; k-- > 0;) {
    if (!joins(a, k) || !joins(b, k)) continue;
    for (Layout* l : {&a, &b}) {
      Dim& m = (*l)[k];
      m.n *= (*l)[k + 1].n;
      m.outer = (*l)[k + 1].outer;
      l->erase(l->begin() + static_cast<std::ptrdiff_t>(k) + 1);
    }
  }
}

// The dim (of extent > 1) along which `l`'s offsets advance least, or -1 when every extent is 1.
int densest(const Layout& l) {
  int best = -1;
  for (int k = 0; k < static_cast<int>(l.size()); ++k)
    if (l[k].size() > 1 && (best < 0 || l[k].step() < l[best].step())) best = k;
  return best;
}

template <bool kAdd>
inline void put(float* d, float v) {
  if constexpr (kAdd)
    *d = v + *d;
  else
    *d = v;
}

// Stores v at d, or with kAdd adds it to what d holds (v + d, the order oneDNN's sum takes).
template <bool kAdd>
inline void put4(float* d, __m128 v) {
  if constexpr (kAdd) v = _mm_add_ps(v, _mm_loadu_ps(d));
  _mm_storeu_ps(d, v);
}

// A tile of np x nq (each at most kTile) elements from s (p at stride sp, q at sq) to d (p at dp,
// q at dq). With the source dense along p and the destination along q (a transpose), in 4 x 4
// blocks through SSE registers; otherwise element by element.
template <bool kAdd>
void tile(const float* s, int64_t sp, int64_t sq, float* d, int64_t dp, int64_t dq, int64_t np,
          int64_t nq) {
  if (sp != 1 || dq != 1) {
    for (int64_t iq = 0; iq < nq; ++iq)
      for (int64_t ip = 0; ip < np; ++ip) put<kAdd>(d + ip * dp + iq * dq, s[iq * sq + ip * sp]);
    return;
  }
  const int64_t p4 = np & ~int64_t{3}, q4 = nq & ~int64_t{3};
  for (int64_t iq = 0; iq < q4; iq += 4) {
    for (int64_t ip = 0; ip < p4; ip += 4) {
      const float* r = s + iq * sq + ip;
      __m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + sq), r2 = _mm_loadu_ps(r + 2 * sq),
             r3 = _mm_loadu_ps(r + 3 * sq);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      float* w = d + ip * dp + iq;
      put4<kAdd>(w, r0);
      put4<kAdd>(w + dp, r1);
      put4<kAdd>(w + 2 * dp, r2);
      put4<kAdd>(w + 3 * dp, r3);
    }
    for (int64_t ip = p4; ip < np; ++ip)
      for (int64_t k = iq; k < iq + 4; ++k) put<kAdd>(d + ip * dp + k, s[k * sq + ip]);
  }
  for (int64_t iq = q4; iq < nq; ++iq)
    for (int64_t ip = 0; ip < np; ++ip) put<kAdd>(d + ip * dp + iq, s[iq * sq + ip]);
}

template <bool kAdd>
void copy(const Layout& from, const float* src, const Layout& to, float* dst) {
  int p = densest(from), q = densest(to);
  if (p < 0) p = 0;
  if (q < 0) q = p;
  // The dims outside the tile, outermost first.
  std::vector<int> outer;
  for (int k = 0; k < static_cast<int>(from.size()); ++k)
    if (k != p && k != q) outer.push_back(k);
  const Dim &fp = from[p], &fq = from[q], &tp = to[p], &tq = to[q];
  const int64_t ep = fp.size(), eq = fq.size();
  const bool same = p == q;  // one dense dim for both: a copy along it, the tile is the whole dim
  const int64_t np = same ? 1 : (ep + kTile - 1) / kTile, nq = same ? 1 : (eq + kTile - 1) / kTile;
  int64_t n_outer = 1;
  for (int k : outer) n_outer *= from[k].size();
  const int64_t total = n_outer * ep * (same ? 1 : eq), items = n_outer * np * nq;
  // Consecutive tiles step along the dim that moves both sides least: along the source's dense
  // dim for `Acdb48a` from `abcd`, whose rows lie 4 KB apart (stepping down them instead missed
  // the cache on every row).
  const bool p_first = fp.step() + tp.step() <= fq.step() + tq.step();
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t item = 0; item < items; ++item) {
    // The dims outside the tile vary fastest: consecutive items then read the lines (and write
    // near the lines) the last one did, e.g. the next tap of the same weights' rows.
    const int64_t in_tiles = item / n_outer;
    const int64_t bp = p_first ? in_tiles % np : in_tiles / nq;
    const int64_t bq = p_first ? in_tiles / np : in_tiles % nq;
    int64_t rest = item % n_outer, s0 = 0, d0 = 0;
    for (auto k = outer.rbegin(); k != outer.rend(); ++k) {
      const int64_t e = from[*k].size(), i = rest % e;
      rest /= e;
      s0 += from[*k].at(i);
      d0 += to[*k].at(i);
    }
    if (same) {  // runs that cross no block edge of either side, each a contiguous copy
      for (int64_t i0 = 0, i1; i0 < ep; i0 = i1) {
        i1 = std::min(fp.block_end(i0), tp.block_end(i0));
        const float* s = src + s0 + fp.at(i0);
        float* d = dst + d0 + tp.at(i0);
        const int64_t ss = fp.step(), ds = tp.step();
        if (ss == 1 && ds == 1)
          for (int64_t i = 0; i < i1 - i0; ++i) put<kAdd>(d + i, s[i]);
        else
          for (int64_t i = 0; i < i1 - i0; ++i) put<kAdd>(d + i * ds, s[i * ss]);
      }
      continue;
    }
    const int64_t p0 = bp * kTile, p1 = std::min(ep, p0 + kTile);
    const int64_t q0 = bq * kTile, q1 = std::min(eq, q0 + kTile);
    if (fp.affine(p0, p1) && fq.affine(q0, q1) && tp.affine(p0, p1) && tq.affine(q0, q1)) {
      tile<kAdd>(src + s0 + fp.at(p0) + fq.at(q0), fp.step(), fq.step(),
                 dst + d0 + tp.at(p0) + tq.at(q0), tp.step(), tq.step(), p1 - p0, q1 - q0);
      continue;
    }
    for (int64_t iq = q0; iq < q1; ++iq) {
      const float* s = src + s0 + fq.at(iq);
      float* d = dst + d0 + tq.at(iq);
      for (int64_t ip = p0; ip < p1; ++ip) put<kAdd>(d + tp.at(ip), s[fp.at(ip)]);
    }
  }
}

}  // namespace

bool own_reorder(const dnnl::memory::desc& from, const float* src, const dnnl::memory::desc& to,
                 float* dst, bool add, bool to_padding_zeroed) {
  const dnnl_memory_desc_t &f = from.data, &t = to.data;
  if (f.ndims != kRank || t.ndims != kRank) return false;
  for (int k = 0; k < kRank; ++k) {
    if (f.dims[k] != t.dims[k]) return false;
    if (t.padded_dims[k] != t.dims[k] && !to_padding_zeroed) return false;
  }
  auto fl = layout(f), tl = layout(t);
  if (!fl || !tl) return false;
  merge(*fl, *tl);
  if (add)
    copy<true>(*fl, src, *tl, dst);
  else
    copy<false>(*fl, src, *tl, dst);
  return true;
}

}  // namespace heddle::kdetail
