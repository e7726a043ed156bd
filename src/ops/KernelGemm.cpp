// heddle's own one-thread sgemm for AVX2 + FMA hosts: Goto's blocked, packed product (as in BLIS
// and OpenBLAS: a panel of B packed per depth block, a block of A packed to stay in L2, a 6x16
// register tile of C per micro-kernel call). Transposed operands are packed by 8x8 AVX
// transposes, row-major ones streamed row by row, and C's lines are fetched before the tile
// accumulates into them. On the GPT training step's nine linear products (1024 tokens, hidden 256
// and 1024) on an AMD EPYC (Zen 3) host it took 4-9% less time than OpenBLAS 0.3.21 with hot
// operands (bench/sgemm_entries.cpp), a few percent inside the step (docs/benchmarks.md).
//
// Every element of C is summed in the same order whichever rows or columns a call covers (the
// depth is split into the same blocks, each summed k = 0, 1, ... in one lane), so splitting a
// product over threads changes no bits.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "KernelUtil.h"
#include "heddle/support/HugePages.h"

namespace heddle::kdetail {

namespace {

constexpr int64_t kMr = 6;     // rows of C per micro-kernel call
constexpr int64_t kNr = 16;    // columns of C per micro-kernel call (two 8-float registers)
constexpr int64_t kKc = 256;   // depth block: a 16-column sliver of B (16 KiB) stays in L1
constexpr int64_t kMc = 144;   // rows of A per packed block (144 KiB, in the 512 KiB L2)
constexpr int64_t kNc = 2048;  // columns of B per packed panel (2 MiB, in L3)

#define HEDDLE_AVX2 __attribute__((target("avx2,fma")))

// Packed operands of one thread, allocated on its first product and kept; B's 2 MiB panel on a
// huge page (HugePages.h).
struct PackBuffers {
  HugeBuffer<float> a;  // kMc x kKc, plus slack for the transposes' full stores
  HugeBuffer<float> b;  // kKc x kNc
};

PackBuffers& buffers() {
  thread_local PackBuffers buf;
  if (buf.a == nullptr) {
    buf.a = huge_buffer<float>(kMc * kKc + 8);
    buf.b = huge_buffer<float>(kKc * kNc);
  }
  return buf;
}

// Transposes the 8x8 block of floats in r0..r7 (row i becomes column i).
HEDDLE_AVX2 inline void transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4,
                                   __m256& r5, __m256& r6, __m256& r7) {
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Interleaves `n` (6 or 8) rows, each contiguous along the depth: p[k * ld + r] = rows[r][k] for
// k < kc. Each step of 8 depths stores 8 floats per depth, 2 past the 6 rows' slots (the next
// depth's slots, written after; the last step's land in the buffer's slack).
HEDDLE_AVX2 void interleave_rows(const float* const* rows, int64_t n, int64_t kc, float* p,
                                 int64_t ld) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 r0 = _mm256_loadu_ps(rows[0] + k), r1 = _mm256_loadu_ps(rows[1] + k);
    __m256 r2 = _mm256_loadu_ps(rows[2] + k), r3 = _mm256_loadu_ps(rows[3] + k);
    __m256 r4 = _mm256_loadu_ps(rows[4] + k), r5 = _mm256_loadu_ps(rows[5] + k);
    __m256 r6 = n == 8 ? _mm256_loadu_ps(rows[6] + k) : _mm256_setzero_ps();
    __m256 r7 = n == 8 ? _mm256_loadu_ps(rows[7] + k) : _mm256_setzero_ps();
    transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
    float* q = p + k * ld;
    _mm256_storeu_ps(q, r0);
    _mm256_storeu_ps(q + ld, r1);
    _mm256_storeu_ps(q + 2 * ld, r2);
    _mm256_storeu_ps(q + 3 * ld, r3);
    _mm256_storeu_ps(q + 4 * ld, r4);
    _mm256_storeu_ps(q + 5 * ld, r5);
    _mm256_storeu_ps(q + 6 * ld, r6);
    _mm256_storeu_ps(q + 7 * ld, r7);
  }
  for (; k < kc; ++k)
    for (int64_t r = 0; r < n; ++r) p[k * ld + r] = rows[r][k];
}

// Packs the mc x kc block of A at `a` into slivers of kMr rows, each kc x kMr (depth-major),
// zero-padding the last sliver's missing rows.
HEDDLE_AVX2 void pack_a(bool ta, const float* a, int64_t lda, int64_t mc, int64_t kc, float* p) {
  const int64_t full = mc / kMr, rest = mc - full * kMr;
  if (ta) {  // A stored depth-major: each depth's row holds kMr floats per sliver
    // Eight floats per sliver and depth: the two past its kMr land on the next depth's slots,
    // written after (the last depth's, which would land on the next sliver, is copied exactly;
    // the two read past a row are the next row's, which exists below the last depth). Slivers
    // kMr * kc floats apart share few L1 sets, so a depth's stores go to kTaGroup slivers at a
    // time: with all 24 of a block in flight they evicted one another, and the copy took 2.5x
    // as long with the operands in L1.
    constexpr int64_t kTaGroup = 8;
    for (int64_t g = 0; g < full; g += kTaGroup) {
      const int64_t ge = std::min(full, g + kTaGroup);
      for (int64_t k = 0; k + 1 < kc; ++k) {
        const float* s = a + k * lda + g * kMr;
        float* q = p + k * kMr + g * kMr * kc;
        for (int64_t sl = g; sl < ge; ++sl, s += kMr, q += kMr * kc)
          _mm256_storeu_ps(q, _mm256_loadu_ps(s));
      }
    }
    const float* s = a + (kc - 1) * lda;
    float* q = p + (kc - 1) * kMr;
    for (int64_t sl = 0; sl < full; ++sl, s += kMr, q += kMr * kc) {
      _mm_storeu_ps(q, _mm_loadu_ps(s));
      q[4] = s[4];
      q[5] = s[5];
    }
  } else {
    for (int64_t sl = 0; sl < full; ++sl) {
      const float* rows[8];
      for (int64_t i = 0; i < kMr; ++i) rows[i] = a + (sl * kMr + i) * lda;
      interleave_rows(rows, kMr, kc, p + sl * kMr * kc, kMr);
    }
  }
  if (rest == 0) return;
  float* q = p + full * kMr * kc;
  std::fill(q, q + kMr * kc, 0.0f);
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t i = 0; i < rest; ++i) {
      const int64_t row = full * kMr + i;
      q[k * kMr + i] = ta ? a[k * lda + row] : a[row * lda + k];
    }
}

// Packs the kc x nc panel of B at `b` into slivers of kNr columns, each kc x kNr, zero-padding
// the last sliver's missing columns.
HEDDLE_AVX2 void pack_b(bool tb, const float* b, int64_t ldb, int64_t kc, int64_t nc, float* p) {
  int64_t j0 = 0;
  if (!tb) {  // B stored row-major: read row by row (streams from memory), into every sliver
    const int64_t full = nc / kNr;
    for (int64_t k = 0; k < kc; ++k) {
      const float* s = b + k * ldb;
      float* q = p + k * kNr;
      for (int64_t sl = 0; sl < full; ++sl, s += kNr, q += kNr * kc) {
        _mm256_store_ps(q, _mm256_loadu_ps(s));
        _mm256_store_ps(q + 8, _mm256_loadu_ps(s + 8));
      }
    }
    j0 = full * kNr;
    p += full * kNr * kc;
  }
  for (; j0 < nc; j0 += kNr, p += kNr * kc) {
    const int64_t nr = std::min(kNr, nc - j0);
    if (nr == kNr) {  // B stored column-major: 8 columns at a time, transposed
      for (int64_t h = 0; h < 2; ++h) {
        const float* rows[8];
        for (int64_t j = 0; j < 8; ++j) rows[j] = b + (j0 + 8 * h + j) * ldb;
        interleave_rows(rows, 8, kc, p + 8 * h, kNr);
      }
    } else {
      std::fill(p, p + kNr * kc, 0.0f);
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < nr; ++j)
          p[k * kNr + j] = tb ? b[(j0 + j) * ldb + k] : b[k * ldb + j0 + j];
    }
  }
}

// One row of the register tile: (lo, hi) += a * (b0, b1).
[[gnu::always_inline]] HEDDLE_AVX2 inline void fma_row(float a, __m256 b0, __m256 b1, __m256& lo,
                                                       __m256& hi) {
  const __m256 ai = _mm256_set1_ps(a);
  lo = _mm256_fmadd_ps(ai, b0, lo);
  hi = _mm256_fmadd_ps(ai, b1, hi);
}

// C's whole kMr x kNr tile at `c` = (its values when `add`) + the register tile `acc`.
[[gnu::always_inline]] HEDDLE_AVX2 inline void store_tile(const __m256 (&acc)[kMr][2], float* c,
                                                          int64_t ldc, bool add) {
  for (int64_t i = 0; i < kMr; ++i) {
    float* ci = c + i * ldc;
    __m256 lo = acc[i][0], hi = acc[i][1];
    if (add) {
      lo = _mm256_add_ps(_mm256_loadu_ps(ci), lo);
      hi = _mm256_add_ps(_mm256_loadu_ps(ci + 8), hi);
    }
    _mm256_storeu_ps(ci, lo);
    _mm256_storeu_ps(ci + 8, hi);
  }
}

// C's mr x nr tile at `c` (mr <= kMr, nr <= kNr) = (its values when `add`) + the product of the
// packed slivers a (kc x kMr) and b (kc x kNr).
// On a cache line of its own: where the FMA loop falls against 64-byte lines changed whole-step
// times by 1-2% between builds that differed elsewhere.
[[gnu::aligned(64)]] HEDDLE_AVX2 void micro_kernel(int64_t kc, const float* a, const float* b,
                                                   float* c, int64_t ldc, bool add, int64_t mr,
                                                   int64_t nr) {
  for (int64_t i = 0; i < mr; ++i) {  // C's lines on their way while the products run
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k, a += kMr, b += kNr) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    // Keeps B's two registers loaded once: without it GCC folds the loads into every FMA,
    // three loads per two FMAs, and the kernel runs at half the speed, bound by loads.
    asm("" : "+x"(b0), "+x"(b1));
    fma_row(a[0], b0, b1, c00, c01);
    fma_row(a[1], b0, b1, c10, c11);
    fma_row(a[2], b0, b1, c20, c21);
    fma_row(a[3], b0, b1, c30, c31);
    fma_row(a[4], b0, b1, c40, c41);
    fma_row(a[5], b0, b1, c50, c51);
  }
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMr && nr == kNr) {
    store_tile(acc, c, ldc, add);
    return;
  }
  alignas(32) float t[kMr * kNr];
  for (int64_t i = 0; i < kMr; ++i) {
    _mm256_store_ps(t + i * kNr, acc[i][0]);
    _mm256_store_ps(t + i * kNr + 8, acc[i][1]);
  }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j)
      c[i * ldc + j] = add ? c[i * ldc + j] + t[i * kNr + j] : t[i * kNr + j];
}

// Packs depths [k0, k1) of the sliver of `rows` (<= kMr) rows of A at `a` (its first row, depth 0
// of the block) into their slots of the sliver `p` (kc x kMr, depth-major), zero-padding missing
// rows; the other depths' slots are left as they are.
HEDDLE_AVX2 void pack_a_depths(bool ta, const float* a, int64_t lda, int64_t rows, int64_t k0,
                               int64_t k1, float* p) {
  if (!ta && rows == kMr) {
    const float* r[8];
    for (int64_t i = 0; i < kMr; ++i) r[i] = a + i * lda + k0;
    interleave_rows(r, kMr, k1 - k0, p + k0 * kMr, kMr);
    return;
  }
  if (ta && rows == kMr) {
    for (int64_t k = k0; k < k1; ++k) {
      const float* s = a + k * lda;
      float* q = p + k * kMr;
      _mm_storeu_ps(q, _mm_loadu_ps(s));
      q[4] = s[4];
      q[5] = s[5];
    }
    return;
  }
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t i = 0; i < kMr; ++i)
      p[k * kMr + i] = i >= rows ? 0.0f : ta ? a[k * lda + i] : a[i * lda + k];
}

// pack_a_depths for a sliver of `cols` (<= kNr) columns of B at `b` into `p` (kc x kNr).
HEDDLE_AVX2 void pack_b_depths(bool tb, const float* b, int64_t ldb, int64_t cols, int64_t k0,
                               int64_t k1, float* p) {
  if (tb && cols == kNr) {
    for (int64_t h = 0; h < 2; ++h) {
      const float* r[8];
      for (int64_t j = 0; j < 8; ++j) r[j] = b + (8 * h + j) * ldb + k0;
      interleave_rows(r, 8, k1 - k0, p + k0 * kNr + 8 * h, kNr);
    }
    return;
  }
  if (!tb && cols == kNr) {
    for (int64_t k = k0; k < k1; ++k) {
      _mm256_store_ps(p + k * kNr, _mm256_loadu_ps(b + k * ldb));
      _mm256_store_ps(p + k * kNr + 8, _mm256_loadu_ps(b + k * ldb + 8));
    }
    return;
  }
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t j = 0; j < kNr; ++j)
      p[k * kNr + j] = j >= cols ? 0.0f : tb ? b[j * ldb + k] : b[k * ldb + j];
}

// True when some element of C's tile of rows [i0, i1) and columns [j0, j1) is visible under
// `vis` (on_c): some row's (column's) visible range of columns (rows) meets the tile's.
bool tile_visible(const CausalTiles& vis, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t u0 = vis.outer_rows ? i0 : j0, u1 = vis.outer_rows ? i1 : j1;
  const int64_t w0 = vis.outer_rows ? j0 : i0, w1 = vis.outer_rows ? j1 : i1;
  return vis.prefix ? w0 < u1 - 1 + vis.d : w1 - 1 >= u0 + vis.d;
}

// The depths [first, second) that the rows (or columns, as `vis` says) [u0, u1) of C read under
// `vis`: the union of their visible ranges, within [0, k).
std::pair<int64_t, int64_t> visible_depths(const CausalTiles& vis, int64_t u0, int64_t u1,
                                           int64_t k) {
  if (vis.prefix) return {0, std::clamp<int64_t>(u1 - 1 + vis.d, 0, k)};
  return {std::clamp<int64_t>(u0 + vis.d, 0, k), k};
}

void zero_tile(float* c, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t i = 0; i < mr; ++i) std::fill(c + i * ldc, c + i * ldc + nr, 0.0f);
}

// C (= or += when `add`) A B, blocked and packed; with `vis` on the depths, each register tile
// over its visible depths only (a tile sums each depth block's part of its depth range in turn:
// the first part it has overwrites C unless `add`, the later ones add, as the dense product's
// blocks do); with `vis` on C, only the tiles with a visible element (the others set to 0 unless
// `add`).
HEDDLE_AVX2 void blocked(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b, int64_t ldb, bool add, float* c, int64_t ldc,
                         const CausalTiles* vis) {
  PackBuffers& buf = buffers();
  float *const pa = buf.a.get(), *const pb = buf.b.get();
  // With `vis` on the depths, the operand whose rows (A) or columns (B) the mask narrows has each
  // sliver packed over the depths its tiles read only.
  const bool on_depths = vis != nullptr && !vis->on_c;
  const bool narrow_a = on_depths && vis->outer_rows, narrow_b = on_depths && !vis->outer_rows;
  // Packs an operand's block whole, or (`narrow`) sliver by sliver (`len` rows or columns from
  // u0, `width` per sliver) over the depths of [p0, p0 + kc) its tiles read.
  auto pack = [&](bool narrow, int64_t u0, int64_t len, int64_t width, int64_t p0, int64_t kc,
                  const auto& whole, const auto& sliver) {
    if (!narrow) return whole();
    for (int64_t r = 0; r < len; r += width) {
      const int64_t w = std::min(width, len - r);
      const auto [lo, hi] = visible_depths(*vis, u0 + r, u0 + r + w, k);
      sliver(r, w, std::clamp<int64_t>(lo - p0, 0, kc), std::clamp<int64_t>(hi - p0, 0, kc));
    }
  };
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0);
      const float* bb = tb ? b + j0 * ldb + p0 : b + p0 * ldb + j0;
      pack(
          narrow_b, j0, nc, kNr, p0, kc, [&] { pack_b(tb, bb, ldb, kc, nc, pb); },
          [&](int64_t jr, int64_t nr, int64_t ka, int64_t kb) {
            pack_b_depths(tb, tb ? bb + jr * ldb : bb + jr, ldb, nr, ka, kb, pb + jr * kc);
          });
      const bool add_block = add || p0 > 0;
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t mc = std::min(kMc, m - i0);
        const float* ab = ta ? a + p0 * lda + i0 : a + i0 * lda + p0;
        pack(
            narrow_a, i0, mc, kMr, p0, kc, [&] { pack_a(ta, ab, lda, mc, kc, pa); },
            [&](int64_t ir, int64_t mr, int64_t ka, int64_t kb) {
              pack_a_depths(ta, ta ? ab + ir : ab + ir * lda, lda, mr, ka, kb, pa + ir * kc);
            });
        for (int64_t jr = 0; jr < nc; jr += kNr)
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int64_t mr = std::min(kMr, mc - ir), nr = std::min(kNr, nc - jr);
            float* ct = c + (i0 + ir) * ldc + j0 + jr;
            if (vis != nullptr && vis->on_c &&
                !tile_visible(*vis, i0 + ir, i0 + ir + mr, j0 + jr, j0 + jr + nr)) {
              if (p0 == 0 && !add) zero_tile(ct, ldc, mr, nr);
              continue;
            }
            if (!on_depths) {
              micro_kernel(kc, pa + ir * kc, pb + jr * kc, ct, ldc, add_block, mr, nr);
              continue;
            }
            const auto [lo, hi] = narrow_a ? visible_depths(*vis, i0 + ir, i0 + ir + mr, k)
                                           : visible_depths(*vis, j0 + jr, j0 + jr + nr, k);
            if (hi <= lo) {
              if (p0 == 0 && !add) zero_tile(ct, ldc, mr, nr);
              continue;
            }
            const int64_t ka = std::max(p0, lo), kb = std::min(p0 + kc, hi);
            if (kb <= ka) continue;
            micro_kernel(kb - ka, pa + ir * kc + (ka - p0) * kMr, pb + jr * kc + (ka - p0) * kNr,
                         ct, ldc, add || ka > lo, mr, nr);
          }
      }
    }
  }
}

// micro_kernel on A and B in place, unpacked: A(i, k) at a[i * sa + k * sk] for the tile's kMr
// rows, B's rows of kNr floats at b + k * ldb. The same multiply-adds in the same order, so the
// same bits. Whole tiles only.
[[gnu::aligned(64)]] HEDDLE_AVX2 void micro_kernel_direct(int64_t kc, const float* a, int64_t sa,
                                                          int64_t sk, const float* b, int64_t ldb,
                                                          float* c, int64_t ldc, bool add) {
  for (int64_t i = 0; i < kMr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a, *a1 = a + sa, *a2 = a + 2 * sa, *a3 = a + 3 * sa, *a4 = a + 4 * sa,
              *a5 = a + 5 * sa;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k, b += ldb) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    asm("" : "+x"(b0), "+x"(b1));  // as in micro_kernel
    const int64_t o = k * sk;
    fma_row(a0[o], b0, b1, c00, c01);
    fma_row(a1[o], b0, b1, c10, c11);
    fma_row(a2[o], b0, b1, c20, c21);
    fma_row(a3[o], b0, b1, c30, c31);
    fma_row(a4[o], b0, b1, c40, c41);
    fma_row(a5[o], b0, b1, c50, c51);
  }
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  store_tile(acc, c, ldc, add);
}

// packed_sgemm_causal where the mask narrows the depths and B's rows are contiguous (!tb), in one
// depth block and one panel (attention's P V, dS K, dS^T Q and P^T dO on heads of up to 256
// keys): whole tiles read A and B in place (micro_kernel_direct), edge tiles pack their two
// slivers; each tile sums the depths blocked() gives it, in the same order, so the bits are
// blocked()'s. On AMD Zen 4 packing took about a fifth of a head's P V product (perf, hot), and
// the GPT step's attention einsums, these four among them, took 6.84-7.15 ms against 7.35-7.49
// (min and median of 8 interleaved --profile runs); reading A in place in the scores' and dP's
// products (B transposed, packed) gained nothing measurable. False (nothing
// written) for other arguments.
HEDDLE_AVX2 bool direct_causal(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                               int64_t lda, const float* b, int64_t ldb, bool add, float* c,
                               int64_t ldc, const CausalTiles& vis) {
  if (tb || vis.on_c || k > kKc || n > kNc) return false;
  const int64_t sa = ta ? 1 : lda, sk = ta ? lda : 1;
  alignas(64) float pa[kMr * kKc + 8];
  alignas(64) float pb[kKc * kNr];
  for (int64_t ir = 0; ir < m; ir += kMr)  // a row sliver of A stays in L1 across B's slivers
    for (int64_t jr = 0; jr < n; jr += kNr) {
      const int64_t mr = std::min(kMr, m - ir), nr = std::min(kNr, n - jr);
      float* ct = c + ir * ldc + jr;
      const auto [lo, hi] = vis.outer_rows ? visible_depths(vis, ir, ir + mr, k)
                                           : visible_depths(vis, jr, jr + nr, k);
      if (hi <= lo) {
        if (!add) zero_tile(ct, ldc, mr, nr);
        continue;
      }
      if (mr == kMr && nr == kNr) {
        micro_kernel_direct(hi - lo, a + ir * sa + lo * sk, sa, sk, b + lo * ldb + jr, ldb, ct, ldc,
                            add);
        continue;
      }
      pack_a_depths(ta, ta ? a + ir : a + ir * lda, lda, mr, lo, hi, pa);
      pack_b_depths(false, b + jr, ldb, nr, lo, hi, pb);
      micro_kernel(hi - lo, pa + lo * kMr, pb + lo * kNr, ct, ldc, add, mr, nr);
    }
  return true;
}

bool host_has_avx2_fma() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}

// packed_sgemm (vis null) and packed_sgemm_causal: their argument checks, then blocked().
bool blocked_entry(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                   const CausalTiles* vis) {
  if (!host_has_avx2_fma() || (beta != 0.0f && beta != 1.0f)) return false;
  if (m <= 0 || n <= 0) return true;
  if (k <= 0) {
    if (beta == 0.0f) zero_tile(c, ldc, m, n);
    return true;
  }
  if (vis != nullptr && direct_causal(ta, tb, m, n, k, a, lda, b, ldb, beta == 1.0f, c, ldc, *vis))
    return true;
  blocked(ta, tb, m, n, k, a, lda, b, ldb, beta == 1.0f, c, ldc, vis);
  return true;
}

}  // namespace

bool packed_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return blocked_entry(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, nullptr);
}

bool packed_sgemm_causal(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                         int64_t ldc, const CausalTiles& vis) {
  return blocked_entry(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, &vis);
}

}  // namespace heddle::kdetail
