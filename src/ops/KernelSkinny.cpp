// Products of a few rows: C = A B (+ C) with at most kSkinnyRows rows of A and a B stored as
// rows of the product's depth (B transposed: each element of C is a dot product of a row of A
// and a row of B). A fully connected layer at batch 2 is such a product (AlexNet's classifier:
// weights of 9216 x 4096, 4096 x 4096 and 4096 x 1000 times two rows), bound by reading the
// weights from memory once. OpenBLAS 0.3.21 first copies each block of the weights into its
// packed layout and then multiplies it, reading the weights twice over and writing them once:
// sgemm_incopy took three quarters of those products' time on an AMD EPYC (Zen 3) host. Here
// each row of B is read once, straight into a few dot products with A's rows, which stay in cache.
// Every element of C is one dot product summed in a fixed order (eight lanes, then the lanes
// pairwise), whichever columns a call covers, so splits over threads change no bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using vf = float __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
// x86-64-v3 contracts the multiply-adds into FMAs (one rounding fewer); the clone is fixed per
// host, so results repeat run to run.
#define HEDDLE_SKINNY_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HEDDLE_SKINNY_CLONES
#endif

[[gnu::always_inline]] inline void load(vf& v, const float* p, int64_t m) {
  if (m == kLanes) {
    std::memcpy(&v, p, sizeof v);
    return;
  }
  v = vf{};
  std::memcpy(&v, p, static_cast<size_t>(m) * sizeof(float));
}

[[gnu::always_inline]] inline float lane_sum(const vf& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Columns [j0, j1) of C's M rows: C(i, j) = dot(A row i, B row j) (+ C(i, j) when `add`), J rows
// of B at a time.
template <int M, int J>
[[gnu::always_inline]] inline void dot_rows(int64_t j0, int64_t j1, int64_t k, const float* a,
                                            const float* b, int64_t ldb, bool add, float* c,
                                            int64_t ldc) {
  int64_t j = j0;
  const int64_t k8 = k / kLanes * kLanes;
  for (; j + J <= j1; j += J) {
    const float* bj = b + j * ldb;
    vf acc[M][J] = {};
    for (int64_t p = 0; p < k8; p += kLanes) {
      vf bv[J], av;
      for (int q = 0; q < J; ++q) std::memcpy(&bv[q], bj + q * ldb + p, sizeof(vf));
      for (int i = 0; i < M; ++i) {
        std::memcpy(&av, a + i * k + p, sizeof(vf));
        for (int q = 0; q < J; ++q) acc[i][q] += av * bv[q];
      }
    }
    if (k8 < k) {  // the tail, zero-padded
      vf bv[J], av;
      for (int q = 0; q < J; ++q) load(bv[q], bj + q * ldb + k8, k - k8);
      for (int i = 0; i < M; ++i) {
        load(av, a + i * k + k8, k - k8);
        for (int q = 0; q < J; ++q) acc[i][q] += av * bv[q];
      }
    }
    for (int i = 0; i < M; ++i)
      for (int q = 0; q < J; ++q) {
        const float s = lane_sum(acc[i][q]);
        c[i * ldc + j + q] = add ? c[i * ldc + j + q] + s : s;
      }
  }
  // The last columns one at a time: the same sum per element as above.
  if constexpr (J > 1)
    for (; j < j1; ++j) dot_rows<M, 1>(j, j + 1, k, a, b, ldb, add, c, ldc);
}

HEDDLE_SKINNY_CLONES void skinny_loop(int64_t m, int64_t n, int64_t k, const float* a,
                                      const float* b, int64_t ldb, bool add, float* c,
                                      int64_t ldc) {
  // Two rows of B at a time: faster than one (more loads in flight) and than four (fewer
  // streams) on AlexNet's classifier shapes, AMD EPYC (Zen 3).
  if (m == 1)
    dot_rows<1, 2>(0, n, k, a, b, ldb, add, c, ldc);
  else
    dot_rows<2, 2>(0, n, k, a, b, ldb, add, c, ldc);
}

}  // namespace

bool skinny_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!tb || m < 1 || m > kSkinnyRows || k < kSkinnyDepth || (beta != 0.0f && beta != 1.0f))
    return false;
  // A's rows contiguous (A is a few rows: a copy costs nothing against reading B).
  thread_local std::vector<float> pa;
  const float* ap = a;
  if (ta || lda != k) {
    pa.resize(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) pa[i * k + p] = ta ? a[p * lda + i] : a[i * lda + p];
    ap = pa.data();
  }
  skinny_loop(m, n, k, ap, b, ldb, beta != 0.0f, c, ldc);
  return true;
}

}  // namespace heddle::kdetail
