// Contraction kernels. einsum groups its index dims into batch, M, N and K and calls sgemm once
// per batch point, on the tiles in place when their strides allow, else on packed copies. The
// sgemm on one thread is the faster library's for the host's instruction set (sgemm1): oneDNN's
// AVX-512 kernels ran the GPT step's shapes about 10% faster per core than OpenBLAS 0.3.21 on an
// AVX-512 host, while on an AVX2-only host (AMD EPYC, Zen 3) oneDNN's AVX2 sgemm ran them up to
// 2x slower than OpenBLAS (the weight gradients' transposed-A products; docs/benchmarks.md), and
// heddle's own packed kernel (KernelGemm.cpp) took 4-9% less time than OpenBLAS. On
// more threads the batch points, or blocks of one product's rows or columns, go to the device's
// pool (see sgemm()). A first operand of mostly zeros (MoE's one-hot dispatch and combine masks)
// multiplies only its nonzeros (sparse_a_gemm): a mixture's routing einsums are most of its
// step's FLOPs as dense products.
// Causal attention's products skip the blocks the mask hides (KernelOptions::causal,
// causal_gemm): a fifth to a third of their time on GPT's 128x128x64 heads; on AVX2-only hosts
// those summing over masked probabilities skip by register tile (packed_sgemm_causal).
// Embedding lookups and their gradients are gathers/scatter-adds over the one-hot dim.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "KernelParallel.h"
#include "KernelUtil.h"
#include "heddle/ops/CausalOperand.h"
#include "heddle/ops/Kernel.h"
#include "heddle/support/ThreadPool.h"

namespace heddle::kernels {

bool onednn_sgemm_first() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

}  // namespace heddle::kernels

namespace heddle::kdetail {

void sgemm_blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// On AVX2-only hosts, products of fewer multiply-adds than this whose C is a whole number of
// 8-float rows and columns (causal attention's 32-row blocks of GPT's 128x128x64 heads) still go
// to oneDNN's sgemm: it ran them at 67-78 GFLOP/s against OpenBLAS's 44-63 on AMD EPYC Zen 3
// (bench/sgemm_entries.cpp vit), a sixth off the GPT step's attention products. ViT's 50-token
// heads ran slower there (50x50x64 at 12 against 34 GFLOP/s in its training step), and from
// 1024x256x256 up OpenBLAS was as fast or faster; those larger products now go to packed_sgemm.
// A fixed shape rule, so a shape always takes the same kernel.
constexpr int64_t kSmallProduct = int64_t{1} << 22;

// On AVX-512 hosts (AMD EPYC Zen 4, one thread, bench/sgemm_entries.cpp vit, three runs on a
// noisy host), oneDNN's matmul primitive ran ViT-B/32's input gradients dy W^T of 100 rows at
// 92-97 GFLOP/s against its sgemm's 75-81 (MLP.fc's, 100x768x3072) and 87-97 against 91-93
// (MLP.proj's), and packed_sgemm ran the weight gradients x^T dy (depth 100) at 93-106 against
// 78-100. In the training step (3 interleaved runs, minimum) the input gradients took 162 ms
// against 179 and the weight gradients 150 against 160, the step 646 against 692 ms; the GPT,
// Llama and MoE steps (products of 1024 rows and depth) do not take these paths. Products of one or
// two rows (AlexNet's classifier at batch 2) ran slower through the matmul primitive (the forward
// 41 against 35 ms), so the rows are bounded both ways.
constexpr std::pair<int64_t, int64_t> kMatmulRows = {16, 256};
// Past those rows, input gradients dy W^T of at most this many columns go to the matmul
// primitive too: GPT's (1024 rows, 256 columns, depth 256 and 1024; bench/sgemm_entries.cpp, three
// runs) ran 4-5% and 5-10% faster there than in oneDNN's sgemm, while its 1024-column one ran
// 6-12% slower. In the GPT training step (5 interleaved runs, minimum) the input gradients
// took 30.2 ms against 31.5, the step 113.1 against 115.0; Llama's step 59.3 against 60.6,
// MoE's 81.2 against 82.9.
constexpr int64_t kMatmulColumns = 256;
constexpr int64_t kPackedDepth = 256;

void sgemm1(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // OpenBLAS runs a product on the calling thread only while it is set to one thread; set to
  // more, concurrent callers would share (and wait for) its own pool.
  if (!kernels::onednn_sgemm_first()) {
    const bool blas1 = openblas_get_num_threads() == 1;
    // A product of one or two rows (a fully connected layer at batch 2) reads B once as dot
    // products instead of through OpenBLAS's packed copies (KernelSkinny.cpp).
    if (blas1 && skinny_sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)) return;
    // Larger products: heddle's own packed sgemm (KernelGemm.cpp), 4-9% faster than OpenBLAS's
    // on the transformer steps' products.
    const bool large = m * n * k >= kSmallProduct;
    if (large && packed_sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)) return;
    if (blas1 && (large || m % 8 != 0 || n % 8 != 0))
      return sgemm_blas(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }
  // AVX-512 hosts: a product of few rows or few columns with B transposed (a linear layer's input
  // gradient dy W^T at ViT-B/32's 100 tokens, or into GPT's 256 features) by oneDNN's matmul
  // primitive, and one of small depth with A transposed (its weight gradient x^T dy) by
  // packed_sgemm; the rest by oneDNN's sgemm. oneDNN runs on this thread alone.
  omp_set_num_threads(1);
  if (kernels::onednn_sgemm_first() && m * n * k >= kSmallProduct) {
    const bool few_rows = m >= kMatmulRows.first && m <= kMatmulRows.second;
    const bool narrow = m > kMatmulRows.second && n <= kMatmulColumns;
    if (tb && !ta && (few_rows || narrow) &&
        matmul_sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc))
      return;
    if (ta && !tb && k <= kPackedDepth &&
        packed_sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc))
      return;
  }
  if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) !=
      dnnl_success)
    sgemm_blas(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// A group of index dims seen from one operand: enumerated in index-dim order.
struct Group {
  std::vector<int64_t> dims;
  int64_t total = 1;
};

// True when index dim k enters some row of `m` (its column is not all zeros).
bool reads_dim(const AffineMap& m, int64_t k) {
  for (int64_t r = 0; r < m.out_rank(); ++r)
    if (m.at(r, k) != 0) return true;
  return false;
}

// True when every row of `p` is one index dim with coefficient 1, no offset, unit window.
bool simple_proj(const IndexProjection& p) {
  const AffineMap& m = p.map();
  for (int64_t r = 0; r < m.out_rank(); ++r) {
    if (m.offset()[r] != 0 || p.window()[r] != 1) return false;
    int nz = 0;
    for (int64_t c = 0; c < m.in_rank(); ++c) {
      if (m.at(r, c) == 0) continue;
      if (m.at(r, c) != 1) return false;
      ++nz;
    }
    if (nz != 1) return false;
  }
  return true;
}

// Merged (extent, stride) of `g` in operand `a` over box extents `ext`, if the group is one
// regular stride in index-dim order; stride 0 means "any" (total extent 1).
bool merged_stride(const Group& g, const Access& a, const std::vector<int64_t>& ext,
                   int64_t* stride) {
  int64_t expect = -1;
  *stride = 0;
  for (auto it = g.dims.rbegin(); it != g.dims.rend(); ++it) {
    int64_t d = *it;
    if (ext[d] == 1) continue;
    int64_t s = a.coef[d];
    if (expect >= 0 && s != expect) return false;
    if (expect < 0) *stride = s;
    expect = s * ext[d];
  }
  return true;
}

// Relative offsets (from the group's first point) of every point of `g`, in enumeration order.
std::vector<int64_t> group_offsets(const Group& g, const Access& a,
                                   const std::vector<int64_t>& ext) {
  std::vector<int64_t> off = {0};
  for (int64_t d : g.dims) {
    std::vector<int64_t> next;
    next.reserve(off.size() * static_cast<size_t>(ext[d]));
    for (int64_t o : off)
      for (int64_t i = 0; i < ext[d]; ++i) next.push_back(o + i * a.coef[d]);
    off = std::move(next);
  }
  return off;
}

// True when a matrix of rows R and columns C whose merged strides are `rs` and `cs` is one sgemm
// takes as it lies, not transposed: a row's elements contiguous (or one column), rows at least a
// row apart (or one row).
bool row_major(int64_t rs, int64_t cs, const Group& R, const Group& C) {
  return (cs == 1 || C.total == 1) && (R.total == 1 || rs >= std::max<int64_t>(C.total, 1));
}

// True when describe() takes operand `a` (rows group R, cols group C) in place, unpacked.
bool fits(const Access& a, const Group& R, const Group& C, const std::vector<int64_t>& ext) {
  int64_t rs, cs;
  if (!merged_stride(R, a, ext, &rs) || !merged_stride(C, a, ext, &cs)) return false;
  return row_major(rs, cs, R, C) || row_major(cs, rs, C, R);
}

// `g` without index dim d.
Group without(const Group& g, int64_t d, const std::vector<int64_t>& ext) {
  Group out;
  for (int64_t k : g.dims)
    if (k != d) {
      out.dims.push_back(k);
      out.total *= ext[k];
    }
  return out;
}

// When an operand or the result would be packed (its dims of a group interleave with another
// group's, as grouped-query attention's heads and group members do), the smallest dim of M, N or
// K whose removal lets A, B and C all be taken in place; it then becomes a loop dim around sgemm.
// -1 when none does (or nothing would be packed).
int64_t loop_dim(const Access& A, const Access& B, const Access& C, const Group& M, const Group& N,
                 const Group& K, const std::vector<int64_t>& ext) {
  auto all_fit = [&](const Group& m, const Group& n, const Group& k) {
    return fits(A, m, k, ext) && fits(B, k, n, ext) && fits(C, m, n, ext);
  };
  if (all_fit(M, N, K)) return -1;
  int64_t best = -1;
  for (const Group* g : {&M, &N, &K})
    for (int64_t d : g->dims) {
      if (ext[d] == 1 || (best >= 0 && ext[d] >= ext[best])) continue;
      Group m = g == &M ? without(M, d, ext) : M, n = g == &N ? without(N, d, ext) : N,
            k = g == &K ? without(K, d, ext) : K;
      if (all_fit(m, n, k)) best = d;
    }
  return best;
}

// True when a product of m x n x k multiply-adds is worth splitting over threads.
bool worth_threads(int64_t mnk, const KernelOptions& o) {
  return o.threads > 1 && mnk >= 64 * std::max<int64_t>(o.grain, 1);
}

// Calls f(s, e) on o.threads threads of the device's pool for the pieces a product split per
// thread takes of its `len` rows or columns: one per thread, each starting on a multiple of
// `align`, the last running to `len`.
template <class F>
void for_each_piece(int64_t len, int64_t align, const KernelOptions& o, F&& f) {
  const int64_t pieces = std::min<int64_t>(o.threads, (len + align - 1) / align);
  parallel_for(o.threads, pieces, [&](int64_t i) {
    int64_t s = len * i / pieces / align * align, e = len * (i + 1) / pieces / align * align;
    if (i + 1 == pieces) e = len;
    if (e > s) f(s, e);
  });
}

// sgemm1 on o.threads threads of the device's pool: C split into one block of rows (or of
// columns, whichever of M and N is longer) per thread, each a one-thread sgemm. A split per
// thread count is fixed, so results are deterministic run to run. Neither OpenBLAS's pool (which
// waits with sched_yield) nor OpenMP's (which spins at barriers) runs: on a busy host a block
// whose worker the scheduler left out is run by the caller instead of waited for.
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const KernelOptions& o) {
  if (!worth_threads(m * n * k, o)) return sgemm1(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  const bool rows = m >= n;
  for_each_piece(rows ? m : n, rows ? 8 : 16, o, [&](int64_t s, int64_t e) {
    if (rows)
      sgemm1(ta, tb, e - s, n, k, a + (ta ? s : s * lda), lda, b, ldb, beta, c + s * ldc, ldc);
    else
      sgemm1(ta, tb, m, e - s, k, a, lda, b + (tb ? s * ldb : s), ldb, beta, c + s, ldc);
  });
}

// True when the m x k matrix at a (element (i, j) at a[i * ld + j], or a[j * ld + i] when
// transposed) holds fewer than one nonzero in kSparseShare of its elements: a one-hot dispatch or
// combine mask (MoE's routing). The scan stops at the first nonzero beyond that, so a dense
// operand costs a short look.
constexpr int64_t kSparseShare = 32;
constexpr int64_t kSparseMin = 1 << 16;  // smaller masks go through sgemm like any operand
bool mostly_zeros(const float* a, bool trans, int64_t ld, int64_t m, int64_t k) {
  const int64_t rows = trans ? k : m, cols = trans ? m : k;
  const int64_t most = rows * cols / kSparseShare;
  int64_t nz = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * ld;
    for (int64_t c = 0; c < cols; ++c) nz += row[c] != 0.0f;
    if (nz > most) return false;
  }
  return true;
}

// Row-major C (= or +=) A B for an A of mostly zeros, B's and C's rows contiguous: each nonzero
// A(i, j) adds A(i, j) B(j, :) to C(i, :), in A's storage order. Exact where the sum has one
// nonzero term (a dispatch); sums in a fixed order otherwise, so results do not vary run to run.
void sparse_a_gemm(bool ta, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                   const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  const int64_t rows = ta ? k : m, cols = ta ? m : k;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * lda;
    for (int64_t q = 0; q < cols; ++q) {
      const float v = row[q];
      if (v == 0.0f) continue;
      const int64_t i = ta ? q : r, j = ta ? r : q;
      float* ci = c + i * ldc;
      const float* bj = b + j * ldb;
      for (int64_t x = 0; x < n; ++x) ci[x] += v * bj[x];
    }
  }
}

// One matrix operand of sgemm: [rows x cols] at `data` with transposition and leading dim.
struct Mat {
  const float* data = nullptr;
  bool trans = false;
  int64_t ld = 1;
  std::vector<float> packed;
};

// A matrix operand as sgemm takes it, without storage.
struct MatView {
  const float* data = nullptr;
  bool trans = false;
  int64_t ld = 1;
  // Element (i, j).
  const float* at(int64_t i, int64_t j) const { return data + (trans ? j * ld + i : i * ld + j); }
};

// How a causally masked operand (KernelOptions::causal) cuts a product into blocks: the `outer`
// group (M or N) in blocks of kCausalBlock rows or columns, each narrowed to the part of the
// `inner` group (M, N or K) the mask leaves visible. The masked operand's query and key dims are
// one each of the two groups (each group's only dim longer than 1), so a matrix index plus the
// box start is the coordinate the mask compares.
constexpr int64_t kCausalBlock = 32;
struct CausalPlan {
  char outer = 0, inner = 0;    // 'M', 'N' or 'K'
  bool outer_is_query = false;  // the outer group holds the query dim (else the key dim)
  int64_t outer0 = 0, inner0 = 0, shift = 0;  // box starts in the two dims; CausalOperand::shift
};

// The one index dim that tensor dim `t` of `p` reads (simple_proj: with coefficient 1).
int64_t dim_read(const IndexProjection& p, int64_t t) {
  for (int64_t k = 0; k < p.index_rank(); ++k)
    if (p.map().at(t, k) != 0) return k;
  return -1;
}

std::optional<CausalPlan> causal_plan(const Op& op, const Box& box, const kernels::CausalOperand* c,
                                      const Group& M, const Group& N, const Group& K,
                                      const std::vector<int64_t>& ext) {
  if (c == nullptr) return std::nullopt;
  const IndexProjection& p = c->result ? op.results[c->operand].proj : op.inputs[c->operand].proj;
  const int64_t r = p.tensor_rank();
  if (r < 2) return std::nullopt;
  const int64_t iq = dim_read(p, r - 2), ik = dim_read(p, r - 1);
  auto group_of = [&](int64_t d) -> char {
    for (auto [g, name] : {std::pair{&M, 'M'}, std::pair{&N, 'N'}, std::pair{&K, 'K'}})
      if (std::find(g->dims.begin(), g->dims.end(), d) != g->dims.end())
        return g->total == ext[d] ? name : 0;
    return 0;
  };
  if (iq < 0 || ik < 0 || iq == ik) return std::nullopt;
  const char gq = group_of(iq), gk = group_of(ik);
  if (gq == 0 || gk == 0 || gq == gk || (c->result == (gq == 'K' || gk == 'K')))
    return std::nullopt;
  // A result is cut along N (its columns), a zero input along the group that is not K.
  const bool q_outer = c->result ? gq == 'N' : gk == 'K';
  CausalPlan cp;
  cp.outer = q_outer ? gq : gk;
  cp.inner = q_outer ? gk : gq;
  cp.outer_is_query = q_outer;
  cp.outer0 = box.start()[q_outer ? iq : ik];
  cp.inner0 = box.start()[q_outer ? ik : iq];
  cp.shift = c->shift;
  return cp;
}

void zero_block(float* c, int64_t ldc, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i) std::fill(c + i * ldc + j0, c + i * ldc + j1, 0.0f);
}

// causal_gemm by packed_sgemm_causal, on o.threads threads when worth it: false (nothing written)
// where packed_sgemm_causal refuses.
bool causal_packed(const CausalPlan& cp, MatView a, MatView b, int64_t m, int64_t n, int64_t k,
                   float beta, float* c, int64_t ldc, const KernelOptions& o) {
  CausalTiles vis;
  vis.outer_rows = cp.outer == 'M';
  vis.prefix = cp.outer_is_query;
  vis.on_c = cp.inner != 'K';
  // Visible: key <= query + shift, in box coordinates (as the block loop below reads it).
  vis.d =
      cp.outer_is_query ? cp.outer0 + 1 + cp.shift - cp.inner0 : cp.outer0 - cp.shift - cp.inner0;
  if (!worth_threads(m * n * k, o))
    return packed_sgemm_causal(a.trans, b.trans, m, n, k, a.data, a.ld, b.data, b.ld, beta, c, ldc,
                               vis);
  // Pieces start on whole register tiles (6 rows, 16 columns), so every piece sees the tiles the
  // whole product would.
  const bool split_rows = m >= n;
  std::atomic<bool> ok{true};
  for_each_piece(split_rows ? m : n, split_rows ? 24 : 16, o, [&](int64_t s, int64_t e) {
    CausalTiles v = vis;  // the piece's coordinates start at s along the split axis
    if (cp.outer == (split_rows ? 'M' : 'N'))
      v.d += s;
    else if (vis.on_c)  // the split axis is the one the mask narrows
      v.d -= s;
    const bool done = split_rows
                          ? packed_sgemm_causal(a.trans, b.trans, e - s, n, k, a.at(s, 0), a.ld,
                                                b.data, b.ld, beta, c + s * ldc, ldc, v)
                          : packed_sgemm_causal(a.trans, b.trans, m, e - s, k, a.data, a.ld,
                                                b.at(0, s), b.ld, beta, c + s, ldc, v);
    if (!done) ok = false;
  });
  return ok;
}

// C (= or +=, beta 0 or 1) A B by blocks of the plan's outer group, each over the visible range
// of its inner group only: a K range narrowed to the terms that are not the mask's zeros, or a
// range of C's rows or columns narrowed to those the mask does not hide (the block's others are
// set to 0 when overwriting). Elements on the diagonal blocks are computed densely.
//
// On hosts with AVX2 and FMA the product is instead one packed_sgemm_causal call (per thread: C's
// rows or columns split as sgemm splits them, on whole register tiles, so no element's value
// depends on the split): each operand packed once; where the mask narrows the depth (P V,
// dQ = dS K, dV = P^T dO, dK = dS^T Q) each 6x16 register tile sums only its visible depths, and
// where it hides part of C (the scores, dP) only the tiles with a visible element are computed.
// On GPT's 128x128x64 heads the first took 0.77-0.98 of the time of the 32-row blocks through
// oneDNN on an AMD EPYC (Zen 3) host (bench/sgemm_entries.cpp causal). On Zen 4, whose other
// products stay with oneDNN's sgemm (onednn_sgemm_first()), 0.88-0.99 per head, and the GPT step
// 0.991 and 1.000 of the time in two A/Bs (20 and 16 interleaved rounds): no slower, and one
// kernel, whose splits change no bits, on every host with AVX2.
void causal_gemm(const CausalPlan& cp, MatView a, MatView b, int64_t m, int64_t n, int64_t k,
                 float beta, float* c, int64_t ldc, const KernelOptions& o) {
  const bool rows = cp.outer == 'M';
  if (causal_packed(cp, a, b, m, n, k, beta, c, ldc, o)) return;
  const int64_t len = rows ? m : n, wtot = cp.inner == 'K' ? k : rows ? n : m;
  for (int64_t u0 = 0; u0 < len; u0 += kCausalBlock) {
    const int64_t u1 = std::min(len, u0 + kCausalBlock);
    // Visible: key <= query + shift.
    int64_t w0 = 0, w1 = wtot;
    if (cp.outer_is_query)
      w1 = std::clamp<int64_t>(cp.outer0 + u1 + cp.shift - cp.inner0, 0, wtot);
    else
      w0 = std::clamp<int64_t>(cp.outer0 + u0 - cp.shift - cp.inner0, 0, wtot);
    int64_t i0 = rows ? u0 : 0, i1 = rows ? u1 : m, j0 = rows ? 0 : u0, j1 = rows ? n : u1;
    int64_t k0 = 0, k1 = k;
    if (cp.inner == 'K') {
      k0 = w0;
      k1 = std::max(w0, w1);
    } else if (beta == 0.0f) {  // the hidden rows or columns of the block
      if (rows) {
        zero_block(c, ldc, i0, i1, 0, w0);
        zero_block(c, ldc, i0, i1, std::max(w0, w1), n);
      } else {
        zero_block(c, ldc, 0, w0, j0, j1);
        zero_block(c, ldc, std::max(w0, w1), m, j0, j1);
      }
    }
    if (cp.inner == 'N') j0 = w0, j1 = w1;
    if (cp.inner == 'M') i0 = w0, i1 = w1;
    if (i1 <= i0 || j1 <= j0) continue;
    if (k1 > k0)
      sgemm(a.trans, b.trans, i1 - i0, j1 - j0, k1 - k0, a.at(i0, k0), a.ld, b.at(k0, j0), b.ld,
            beta, c + i0 * ldc + j0, ldc, o);
    else if (beta == 0.0f)
      zero_block(c, ldc, i0, i1, j0, j1);
  }
}

// Describes operand `a` (rows group R, cols group C) at local offset `base` as a sgemm matrix,
// packing it when its strides do not form one.
void describe(const Access& a, const Group& R, const Group& C, int64_t base,
              const std::vector<int64_t>& roff, const std::vector<int64_t>& coff, bool can_direct,
              int64_t rs, int64_t cs, Mat* m) {
  const float* d = a.t->f32() + base;
  if (can_direct) {
    if (row_major(rs, cs, R, C)) {
      m->data = d;
      m->trans = false;
      m->ld = R.total == 1 ? std::max<int64_t>(C.total, 1) : rs;
      return;
    }
    if (row_major(cs, rs, C, R)) {
      m->data = d;
      m->trans = true;
      m->ld = C.total == 1 ? std::max<int64_t>(R.total, 1) : cs;
      return;
    }
  }
  m->packed.resize(static_cast<size_t>(R.total * C.total));
  for (int64_t r = 0; r < R.total; ++r)
    for (int64_t c = 0; c < C.total; ++c) m->packed[r * C.total + c] = d[roff[r] + coff[c]];
  m->data = m->packed.data();
  m->trans = false;
  m->ld = std::max<int64_t>(C.total, 1);
}

// An einsum's index dims as a batched product: each dim in the group of the operands that read
// it, and the box's extents.
struct ProductDims {
  Group batch, M, N, K;
  std::vector<int64_t> ext;
};

// The product form of einsum `op` over `box`: false for a float product of two operands with
// plain projections it is not (a dim summed in one operand only, a pure broadcast, a summed dim
// the op does not reduce), which the generic loop runs.
bool product_dims(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  size_t results, ProductDims* pd) {
  if (ins.size() != 2 || results != 1) return false;
  for (const auto* v : {&op.inputs, &op.results})
    for (const auto& x : *v)
      if (!simple_proj(x.proj) || x.padded) return false;
  for (const Tensor* t : ins)
    if (t->is_int()) return false;
  const int64_t n = op.space.rank();
  pd->ext.assign(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < n; ++k) {
    pd->ext[k] = box.end()[k] - box.start()[k];
    bool a = reads_dim(op.inputs[0].proj.map(), k);
    bool b = reads_dim(op.inputs[1].proj.map(), k);
    bool c = reads_dim(op.results[0].proj.map(), k);
    Group* g = a && b && c ? &pd->batch
               : a && c    ? &pd->M
               : b && c    ? &pd->N
               : a && b    ? &pd->K
                           : nullptr;
    if (!g || (g == &pd->K && !op.space.dim(k).reduce)) return false;
    g->dims.push_back(k);
    g->total *= pd->ext[k];
  }
  return true;
}

Status einsum_gemm(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, const KernelOptions& o, bool* handled) {
  *handled = false;
  ProductDims pd;
  if (o.reference || !product_dims(op, box, ins, outs.size(), &pd)) return {};
  Access A(*ins[0], op.inputs[0]), B(*ins[1], op.inputs[1]), C(*outs[0], op.results[0]);
  const int64_t n = op.space.rank();
  auto& [batch, M, N, K, ext] = pd;
  *handled = true;
  if (M.total == 0 || N.total == 0 || K.total == 0 || batch.total == 0) {
    init_outputs(op, box, outs, o);
    return {};
  }
  // A dim of M, N or K whose interleaving would force packing becomes a loop dim instead (a
  // moved K dim sums over the loop: its first point overwrites unless accumulating, the others
  // add).
  std::vector<int64_t> k_loop;
  if (int64_t d = loop_dim(A, B, C, M, N, K, ext); d >= 0) {
    bool in_k = std::find(K.dims.begin(), K.dims.end(), d) != K.dims.end();
    M = without(M, d, ext);
    N = without(N, d, ext);
    K = without(K, d, ext);
    if (in_k) k_loop.push_back(d);
    batch.dims.push_back(d);
  }
  int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
  bool a_direct = merged_stride(M, A, ext, &a_rs) && merged_stride(K, A, ext, &a_cs);
  bool b_direct = merged_stride(K, B, ext, &b_rs) && merged_stride(N, B, ext, &b_cs);
  bool c_merged = merged_stride(M, C, ext, &c_rs) && merged_stride(N, C, ext, &c_cs);
  bool c_direct = c_merged && row_major(c_rs, c_cs, M, N);
  // A result stored transposed (M along its rows' elements) is written in place as
  // C^T = B^T A^T, not through a scattered temporary.
  bool c_transposed = !c_direct && c_merged && row_major(c_cs, c_rs, N, M);
  // describe() packs an operand whose merged strides still fit neither sgemm layout (e.g. a tile
  // wider than the box), so the offsets of A and B are always needed.
  std::vector<int64_t> a_roff = group_offsets(M, A, ext), a_coff = group_offsets(K, A, ext);
  std::vector<int64_t> b_roff = group_offsets(K, B, ext), b_coff = group_offsets(N, B, ext);
  std::vector<int64_t> c_roff, c_coff;
  if (!c_direct && !c_transposed) {
    c_roff = group_offsets(M, C, ext);
    c_coff = group_offsets(N, C, ext);
  }
  // The batch dims are iterated over; the others start at the box start.
  Box bbox = box;
  {
    std::vector<int64_t> s(box.start().values()), e(box.start().values());
    for (int64_t k : batch.dims) e[k] = box.end()[k];
    for (int64_t k = 0; k < n; ++k)
      if (e[k] == s[k]) e[k] = s[k] + 1;
    bbox = Box(IVec(s), IVec(e));
  }
  // A causally masked operand: blocks above the diagonal are skipped (in place results only).
  std::optional<CausalPlan> cplan;
  // (A result stored transposed is C^T = B^T A^T: N and M swap.)
  if (k_loop.empty() && (c_direct || c_transposed))
    cplan = c_direct ? causal_plan(op, box, o.causal, M, N, K, ext)
                     : causal_plan(op, box, o.causal, N, M, K, ext);
  // One sgemm per batch point covers the box's whole K range, so without `accumulate` it
  // overwrites (beta 0) and no separate zeroing pass is needed.
  const bool accumulate_all = store_mode(op) == Store::kSum && o.accumulate;
  auto gemm_at = [&](const int64_t* p, const KernelOptions& go, std::vector<float>& ctmp) {
    bool accumulate = accumulate_all;
    for (int64_t d : k_loop) accumulate = accumulate || p[d] != box.start()[d];
    Mat ma, mb;
    describe(A, M, K, A.offset(p), a_roff, a_coff, a_direct, a_rs, a_cs, &ma);
    describe(B, K, N, B.offset(p), b_roff, b_coff, b_direct, b_rs, b_cs, &mb);
    float* cd = outs[0]->f32() + C.offset(p);
    float* cptr = cd;
    int64_t ldc = M.total == 1 ? N.total : c_rs;
    float beta = accumulate ? 1.0f : 0.0f;
    if (c_transposed) {
      const MatView bt{mb.data, !mb.trans, mb.ld}, at{ma.data, !ma.trans, ma.ld};
      const int64_t ldt = N.total == 1 ? M.total : c_cs;
      if (cplan)
        causal_gemm(*cplan, bt, at, N.total, M.total, K.total, beta, cd, ldt, go);
      else
        sgemm(bt.trans, at.trans, N.total, M.total, K.total, bt.data, bt.ld, at.data, at.ld, beta,
              cd, ldt, go);
      return;
    }
    if (cplan) {
      causal_gemm(*cplan, {ma.data, ma.trans, ma.ld}, {mb.data, mb.trans, mb.ld}, M.total, N.total,
                  K.total, beta, cd, ldc, go);
      return;
    }
    // A routing mask (mostly zeros) as the first operand: only its nonzeros are multiplied.
    // Chosen by the data, which the run computes deterministically, not by timing.
    if (c_direct && !mb.trans && M.total * K.total >= kSparseMin &&
        mostly_zeros(ma.data, ma.trans, ma.ld, M.total, K.total)) {
      sparse_a_gemm(ma.trans, M.total, N.total, K.total, ma.data, ma.ld, mb.data, mb.ld, accumulate,
                    cd, ldc);
      return;
    }
    if (!c_direct) {
      ctmp.assign(static_cast<size_t>(M.total * N.total), 0.0f);
      cptr = ctmp.data();
      ldc = N.total;
      beta = 0.0f;
    }
    sgemm(ma.trans, mb.trans, M.total, N.total, K.total, ma.data, ma.ld, mb.data, mb.ld, beta, cptr,
          ldc, go);
    if (!c_direct)
      for (int64_t r = 0; r < M.total; ++r)
        for (int64_t c = 0; c < N.total; ++c) {
          float v = ctmp[r * N.total + c];
          float& dst = cd[c_roff[r] + c_coff[c]];
          dst = accumulate ? dst + v : v;
        }
  };
  // Many batch points (attention's heads) on the device's threads: runs of points, each point a
  // one-thread sgemm, as on one thread. Batch points that sum into one result (a moved K dim)
  // stay in order on the caller; their sgemms split instead.
  const int64_t points = bbox.volume();
  const int64_t per = M.total * N.total * K.total;
  if (k_loop.empty() && points >= 2 && worth_threads(per * points, o) &&
      (points >= 2 * o.threads || points % o.threads == 0 || !worth_threads(per, o))) {
    KernelOptions one = o;
    one.threads = 1;
    const int64_t runs = std::min<int64_t>(points, 4 * o.threads);
    parallel_for(o.threads, runs, [&](int64_t i) {
      std::vector<float> ctmp;
      std::vector<int64_t> p(static_cast<size_t>(n));
      for (int64_t q = points * i / runs; q < points * (i + 1) / runs; ++q) {
        point_at(bbox, q, p.data());
        gemm_at(p.data(), one, ctmp);
      }
    });
    return {};
  }
  std::vector<float> ctmp;
  for_each_point(bbox, [&](const int64_t* p) { gemm_at(p, o, ctmp); });
  return {};
}

// The most depth of a product whose bias the matmul primitive adds (product_bias). One thread,
// hot (bench/sgemm_entries.cpp bias, three runs): GPT's forward products of depth 256 (1024 rows;
// q/k/v's 256 columns, MLP.fc's 1024) with their bias took 0.87-0.88 and 0.94-0.95 of the time of
// oneDNN's sgemm and a pass over C. In the training step (5 interleaved runs, medians) q/k/v's
// instructions took 1.24-1.30 against 1.30-1.33 ms and MLP.fc's 5.27 against 5.39-5.46; o's, whose
// residual the primitive added too (a binary post-op), 1.46 against 1.39, so residuals stay out
// (and with them GPT's MLP.proj, of depth 1024). Deeper products stay with oneDNN's sgemm:
// ViT-B/32's forward products (100 rows, depth 768 and 3072) ran slower through the matmul
// primitive (session 25: the forward 163.0 against 157.6 ms), and no deeper one was measured faster
// in a step.
constexpr int64_t kBiasDepth = 256;

}  // namespace

bool product_bias(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const Tensor& t, const ProductBias& pb, const KernelOptions& o) {
  ProductDims pd;
  if (!kernels::onednn_sgemm_first() || o.reference || o.accumulate || o.causal != nullptr ||
      t.is_int() || !product_dims(op, box, ins, 1, &pd))
    return false;
  const auto& [batch, M, N, K, ext] = pd;
  if (batch.total != 1 || M.total * N.total * K.total < kSmallProduct || K.total > kBiasDepth)
    return false;
  Access A(*ins[0], op.inputs[0]), B(*ins[1], op.inputs[1]), C(t, op.results[0]);
  // A and B in place either way round, C row-major (as einsum_gemm's c_direct).
  int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
  if (!merged_stride(M, A, ext, &a_rs) || !merged_stride(K, A, ext, &a_cs) ||
      !merged_stride(K, B, ext, &b_rs) || !merged_stride(N, B, ext, &b_cs) ||
      !merged_stride(M, C, ext, &c_rs) || !merged_stride(N, C, ext, &c_cs) ||
      !(row_major(a_rs, a_cs, M, K) || row_major(a_cs, a_rs, K, M)) ||
      !(row_major(b_rs, b_cs, K, N) || row_major(b_cs, b_rs, N, K)) || !row_major(c_rs, c_cs, M, N))
    return false;
  // The bias: one value per column (along N's one dim longer than 1), the same in every row.
  int64_t columns = 0;
  for (int64_t d : N.dims)
    if (ext[d] > 1) {
      if (pb.coef[d] != 1) return false;
      ++columns;
    }
  for (int64_t d : M.dims)
    if (ext[d] > 1 && pb.coef[d] != 0) return false;
  if (columns > 1) return false;
  const std::vector<int64_t> start(box.start().values());
  Mat ma, mb;
  describe(A, M, K, A.offset(start.data()), {}, {}, true, a_rs, a_cs, &ma);
  describe(B, K, N, B.offset(start.data()), {}, {}, true, b_rs, b_cs, &mb);
  const int64_t m = M.total, n = N.total, k = K.total, ldc = m == 1 ? n : c_rs;
  float* c = pb.out + C.offset(start.data());
  // Rows [s, e) through the primitive, or (where it refuses) oneDNN's sgemm and a pass.
  auto rows = [&](int64_t s, int64_t e) {
    const float* a = ma.trans ? ma.data + s : ma.data + s * ma.ld;
    float* cs = c + s * ldc;
    if (matmul_sgemm_bias(ma.trans, mb.trans, e - s, n, k, a, ma.ld, mb.data, mb.ld, 0.0f, pb.bias,
                          cs, ldc))
      return;
    sgemm1(ma.trans, mb.trans, e - s, n, k, a, ma.ld, mb.data, mb.ld, 0.0f, cs, ldc);
    for (int64_t i = 0; i < e - s; ++i)
      for (int64_t j = 0; j < n; ++j) cs[i * ldc + j] += pb.bias[j];
  };
  omp_set_num_threads(1);
  if (!worth_threads(m * n * k, o))
    rows(0, m);
  else
    for_each_piece(m, 8, o, rows);
  return true;
}

namespace {

// The index dim that projection row `row` of `proj` reads.
int64_t dim_of_row(const IndexProjection& proj, int64_t row) {
  for (int64_t k = 0; k < proj.index_rank(); ++k)
    if (proj.map().at(row, k) != 0) return k;
  return -1;
}

// Gather (embedding) or scatter-add (embedding_grad) over the one-hot dim `v`: points of the box
// with v collapsed; the id at each point selects the v coordinate.
Status one_hot(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs, const KernelOptions& o) {
  bool grad = op.kind == OpKind::kEmbeddingGrad;
  init_outputs(op, box, outs, o);
  // embedding: ids, table(v, h) -> out. embedding_grad: ids, dy -> out(v, h).
  int64_t v = grad ? dim_of_row(op.results[0].proj, 0) : dim_of_row(op.inputs[1].proj, 0);
  if (v < 0) return Diagnostic("embedding: cannot find the vocabulary dim");
  Access ids(*ins[0], op.inputs[0]), src(*ins[1], op.inputs[1]), dst(*outs[0], op.results[0]);
  const Access& table_side = grad ? dst : src;  // the operand addressed by v
  int64_t v0 = box.start()[v], v1 = box.end()[v];
  std::vector<int64_t> e(box.end().values());
  e[v] = v0 + 1;
  Box sub(box.start(), IVec(e));
  float* out = outs[0]->f32();
  int64_t V = op.space.dim(v).extent;
  bool bad = false;  // ids outside [0, V) contribute nothing; they are reported below
  const int64_t last = sub.rank() - 1;
  if (last >= 0 && ids.coef[last] == 0 && src.fdata && !o.reference) {
    // Rows along the last dim share one id: the id is read once per row, the row copied (or
    // added) with constant strides.
    const int64_t ss = src.coef[last], ds = dst.coef[last];
    for_each_row(sub, [&](const int64_t* p, int64_t n) {
      auto id = static_cast<int64_t>(ids.load(ids.offset(p)));
      bad = bad || id < 0 || id >= V;
      if (id < v0 || id >= v1) return;
      int64_t shift = table_side.coef[v] * (id - v0);
      const float* from = src.fdata + src.offset(p) + (grad ? 0 : shift);
      float* to = out + dst.offset(p) + (grad ? shift : 0);
      for (int64_t j = 0; j < n; ++j) to[j * ds] += from[j * ss];
    });
  } else {
    for_each_point(sub, [&](const int64_t* p) {
      auto id = static_cast<int64_t>(ids.load(ids.offset(p)));
      bad = bad || id < 0 || id >= V;
      if (id < v0 || id >= v1) return;
      int64_t shift = table_side.coef[v] * (id - v0);
      int64_t so = src.offset(p) + (grad ? 0 : shift);
      int64_t dof = dst.offset(p) + (grad ? shift : 0);
      out[dof] += src.load(so);
    });
  }
  if (bad)
    return Diagnostic("embedding: an id is outside the vocabulary [0, " + std::to_string(V) + ")");
  return {};
}

}  // namespace

Status run_contraction(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                       const std::vector<Tensor*>& outs, const KernelOptions& o) {
  if (op.kind == OpKind::kEmbedding || op.kind == OpKind::kEmbeddingGrad)
    return one_hot(op, box, ins, outs, o);
  bool handled = false;
  HEDDLE_TRY(einsum_gemm(op, box, ins, outs, o, &handled));
  if (handled) return {};
  if (!unit_windows(op)) return Diagnostic("einsum: windowed operands are not supported");
  return run_pointwise(op, box, ins, outs, o);
}

}  // namespace heddle::kdetail
