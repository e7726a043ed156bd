// Private machinery of the reference kernels: operand access through projections, box iteration,
// output initialisation and combining.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ir/Zigzag.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Tensor.h"

namespace heddle::kernels {
struct BoundCall;
}  // namespace heddle::kernels

namespace heddle::kdetail {

using kernels::KernelOptions;

/// How a result element is written.
enum class Store : uint8_t { kAssign, kSum, kMax, kMin };

/// The store mode of `op`: its reduce monoid, or kAssign without reduce dims.
Store store_mode(const Op& op);

inline void store(Store m, float* dst, float v) {
  switch (m) {
    case Store::kAssign:
      *dst = v;
      break;
    case Store::kSum:
      *dst += v;
      break;
    case Store::kMax:
      *dst = std::max(*dst, v);
      break;
    case Store::kMin:
      *dst = std::min(*dst, v);
      break;
  }
}

/// One operand seen through its projection: linear offset of the window start at index point p
/// is base + sum_k coef[k] * p[k] (local to the tile).
struct Access {
  const Tensor* t = nullptr;
  const IndexProjection* proj = nullptr;
  bool padded = false;
  int64_t base = 0;
  std::vector<int64_t> coef;
  std::vector<int64_t> woff;       ///< local offsets of the window's elements, row-major
  const float* fdata = nullptr;    ///< the float buffer (null for integer tensors)
  const int64_t* idata = nullptr;  ///< the integer buffer (null for float tensors)

  Access(const Tensor& tensor, const Operand& operand);
  int64_t offset(const int64_t* p) const {
    int64_t o = base;
    for (size_t k = 0; k < coef.size(); ++k) o += coef[k] * p[k];
    return o;
  }
  /// Global tensor coordinates of the window start at p.
  std::vector<int64_t> coords(const int64_t* p) const;
  /// True when element `e` of the window at global start `c` lies inside the tile.
  bool inside(const std::vector<int64_t>& c, int64_t e) const;
  /// Reads the window at p into buf (row-major); elements outside the tile read `pad`.
  void read(const int64_t* p, float* buf, float pad = 0.0f) const;
  /// Element value at local offset o as float.
  float load(int64_t o) const { return idata ? static_cast<float>(idata[o]) : fdata[o]; }
  int64_t window_size() const { return static_cast<int64_t>(woff.size()); }
};

/// Calls f(p, n) for every row of `box`: p is the row's first point (last coordinate at the box
/// start), n the box extent along the last dim. A 0-d box is one row of length 1.
template <class F>
void for_each_row(const Box& box, F&& f) {
  if (box.empty()) return;
  int64_t r = box.rank();
  std::vector<int64_t> p(box.start().values());
  if (r == 0) {
    f(p.data(), int64_t{1});
    return;
  }
  int64_t n = box.end()[r - 1] - box.start()[r - 1];
  while (true) {
    f(p.data(), n);
    int64_t d = r - 2;
    for (; d >= 0; --d) {
      if (++p[d] < box.end()[d]) break;
      p[d] = box.start()[d];
    }
    if (d < 0) return;
  }
}

/// Like for_each_row, with the trailing dims that every access in `as` walks as one regular
/// stride (coef[d] == coef[d + 1] * extent[d + 1]) merged into one longer row: a weight
/// [CO, CI, 1, 1] is one row of CO * CI elements, not CO * CI rows of one. Precondition: each
/// access has unit stride along the last dim when rows are read as contiguous runs.
template <class F>
void for_each_merged_row(const Box& box, const std::vector<Access>& as, F&& f) {
  if (box.empty()) return;
  const int64_t r = box.rank();
  if (r == 0) return for_each_row(box, f);
  int64_t k0 = r - 1;
  auto merges = [&](int64_t d) {
    const int64_t ext = box.end()[d + 1] - box.start()[d + 1];
    for (const Access& a : as)
      if (a.coef[d] != a.coef[d + 1] * ext) return false;
    return true;
  };
  while (k0 > 0 && merges(k0 - 1)) --k0;
  int64_t len = 1;
  std::vector<int64_t> e(box.end().values());
  for (int64_t d = k0; d < r; ++d) {
    len *= box.end()[d] - box.start()[d];
    e[d] = box.start()[d] + 1;
  }
  for_each_row(Box(box.start(), IVec(e)), [&](int64_t* p, int64_t) { f(p, len); });
}

/// Calls f(p) for every point of `box`.
template <class F>
void for_each_point(const Box& box, F&& f) {
  int64_t r = box.rank();
  for_each_row(box, [&](int64_t* p, int64_t n) {
    if (r == 0) return f(p);
    int64_t s = p[r - 1];
    for (int64_t j = 0; j < n; ++j) {
      p[r - 1] = s + j;
      f(p);
    }
    p[r - 1] = s;
  });
}

/// Resets the image of `box` under result `i` of `op` to the store mode's identity when the op
/// reduces and the call does not accumulate.
void init_outputs(const Op& op, const Box& box, const std::vector<Tensor*>& outs,
                  const KernelOptions& o);

/// Sets the elements of `t` in box `b` (global coordinates) to `v` without allocating a tile.
/// Precondition: t is a float tensor whose region contains b.
void fill_box(Tensor& t, const Box& b, float v);

template <Store M>
inline void store_as(float* dst, float v) {
  store(M, dst, v);
}

/// Lanes of a row summed by unit_row_as (a vector register of floats).
inline constexpr int64_t kSumLanes = 16;

/// For a loop whose body reads neither the point nor the offset: when the first input walks the
/// box's last dim with a stride other than 1 and another dim with stride 1 (and every result
/// walks that dim with stride 0 or 1), moves that dim to the end of `box` and of every access's
/// coefficients, and returns the permuted box; else returns `box`. A reduction over leading axes
/// (y[c] = sum over a, b of x[a, b, c], its index space [c, a, b]) then adds contiguous rows of x
/// into y instead of striding down x's columns; each element still sums its terms in the same
/// order of the reduced dims.
Box unit_stride_last(const Box& box, std::vector<Access>& ai, std::vector<Access>& ao);

/// The row loop of pointwise_as with the strides as constants (so the compiler vectorizes it when
/// f is simple): a and b step by SA and SB (0 or 1), d by 1, or, for a sum, by 0: the row sums
/// into kSumLanes lanes (element j into lane j mod kSumLanes), which are then added in order to
/// *d (rows shorter than kSumLanes: one sum in element order). The order depends only on the
/// row's length, so runs are bitwise repeatable (a per-channel gradient over N x H x W rows).
template <Store M, int SA, int SB, class F>
void unit_row_as(const float* a, const float* b, float* d, int64_t n, const int64_t* p, F& f,
                 bool reduce) {
  if (reduce && n < kSumLanes) {
    float acc = *d;
    for (int64_t j = 0; j < n; ++j) {
      float iv[8] = {a[j * SA], b[j * SB]}, ov[4];
      f(iv, ov, p, j);
      acc += ov[0];
    }
    *d = acc;
    return;
  }
  if (reduce) {
    float lane[kSumLanes] = {};
    int64_t j = 0;
    for (; j + kSumLanes <= n; j += kSumLanes)
      for (int64_t l = 0; l < kSumLanes; ++l) {
        float iv[8] = {a[(j + l) * SA], b[(j + l) * SB]}, ov[4];
        f(iv, ov, p, j + l);
        lane[l] += ov[0];
      }
    for (int64_t l = 0; j < n; ++j, ++l) {
      float iv[8] = {a[j * SA], b[j * SB]}, ov[4];
      f(iv, ov, p, j);
      lane[l] += ov[0];
    }
    float acc = *d;
    for (float v : lane) acc += v;
    *d = acc;
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    float iv[8] = {a[j * SA], b[j * SB]}, ov[4];
    f(iv, ov, p, j);
    store_as<M>(d + j, ov[0]);
  }
}

/// Runs one row through unit_row_as when its strides allow; false (nothing done) otherwise.
template <Store M, class F>
bool unit_row(const float* a, const float* b, float* d, int64_t sa, int64_t sb, int64_t sd,
              int64_t n, const int64_t* p, F& f) {
  bool reduce = sd == 0 && M == Store::kSum;
  if ((sd != 1 && !reduce) || sa < 0 || sa > 1 || sb < 0 || sb > 1) return false;
  if (sa == 1 && sb == 1) unit_row_as<M, 1, 1>(a, b, d, n, p, f, reduce);
  if (sa == 1 && sb == 0) unit_row_as<M, 1, 0>(a, b, d, n, p, f, reduce);
  if (sa == 0 && sb == 1) unit_row_as<M, 0, 1>(a, b, d, n, p, f, reduce);
  if (sa == 0 && sb == 0) unit_row_as<M, 0, 0>(a, b, d, n, p, f, reduce);
  return true;
}

/// The pointwise loop for store mode M (a template so the mode is not re-tested per element);
/// `merge`: rows merged over the trailing dims every operand walks regularly (for_each_merged_row;
/// only for an f that reads neither p nor j).
template <Store M, class F>
void pointwise_as(const Box& box, std::vector<Access>& ai, std::vector<Access>& ao,
                  const std::vector<Tensor*>& outs, F&& f, bool fast, bool merge = false) {
  int64_t r = box.rank();
  size_t ni = ai.size(), no = ao.size();
  bool slow = false, all_float = true;
  for (const auto& a : ai) {
    slow = slow || a.padded;
    all_float = all_float && a.fdata != nullptr;
  }
  std::vector<float> in(ni + 1), out(no + 1);
  std::vector<int64_t> oi(ni), si(ni), oo(no), so(no);
  std::vector<const float*> ip(ni);
  std::vector<float*> od(no);
  auto row = [&](int64_t* p, int64_t n) {
    for (size_t k = 0; k < ni; ++k) {
      oi[k] = ai[k].offset(p);
      si[k] = r ? ai[k].coef[r - 1] : 0;
      if (ai[k].fdata) ip[k] = ai[k].fdata + oi[k];
    }
    for (size_t k = 0; k < no; ++k) {
      so[k] = r ? ao[k].coef[r - 1] : 0;
      od[k] = outs[k]->f32() + ao[k].offset(p);
    }
    if (!slow && all_float && ni <= 2 && no == 1) {
      // Scalars in registers for the common unary and binary cases.
      const float *a = ip[0], *b = ni == 2 ? ip[1] : ip[0];
      int64_t sa = si[0], sb = ni == 2 ? si[1] : si[0], sd = so[0];
      float* d = od[0];
      if (fast && unit_row<M>(a, b, d, sa, sb, sd, n, p, f)) return;
      for (int64_t j = 0; j < n; ++j) {
        float iv[8] = {a[j * sa], b[j * sb]}, ov[4];
        f(iv, ov, p, j);
        store_as<M>(d + j * sd, ov[0]);
      }
      return;
    }
    if (!slow && all_float) {
      for (int64_t j = 0; j < n; ++j) {
        for (size_t k = 0; k < ni; ++k) in[k] = ip[k][j * si[k]];
        f(in.data(), out.data(), p, j);
        for (size_t k = 0; k < no; ++k) store_as<M>(od[k] + j * so[k], out[k]);
      }
      return;
    }
    int64_t s = r ? p[r - 1] : 0;
    for (int64_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < ni; ++k) {
        if (!ai[k].padded) {
          in[k] = ai[k].load(oi[k] + j * si[k]);
          continue;
        }
        if (r) p[r - 1] = s + j;
        auto c = ai[k].coords(p);
        in[k] = ai[k].inside(c, 0) ? ai[k].load(ai[k].offset(p)) : 0.0f;
        if (r) p[r - 1] = s;
      }
      f(in.data(), out.data(), p, j);
      for (size_t k = 0; k < no; ++k) store_as<M>(od[k] + j * so[k], out[k]);
    }
  };
  if (!merge || slow || r == 0) return for_each_row(box, row);
  const Box order = unit_stride_last(box, ai, ao);
  std::vector<Access> all(ai);
  all.insert(all.end(), ao.begin(), ao.end());
  for_each_merged_row(order, all, row);
}

/// Pointwise loop over operands with unit windows: f(in, out, p, j) gets the input values of the
/// point (row start p, offset j along the last dim) and fills out[] for every result, which is
/// stored with `mode`. `pick` (when not empty) lists the inputs f reads, in the order f gets them;
/// `fast` lets rows with unit or zero strides run the constant-stride loops (false: the reference
/// loop for every row); `merge` (with `fast`) merges rows as pointwise_as does, for an f that
/// reads neither p nor j.
template <class F>
void pointwise(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs, Store mode, F&& f, bool fast = true,
               const std::vector<size_t>& pick = {}, bool merge = false) {
  std::vector<Access> ai, ao;
  if (pick.empty())
    for (size_t i = 0; i < ins.size(); ++i) ai.emplace_back(*ins[i], op.inputs[i]);
  for (size_t i : pick) ai.emplace_back(*ins[i], op.inputs[i]);
  for (size_t i = 0; i < outs.size(); ++i) ao.emplace_back(*outs[i], op.results[i]);
  switch (mode) {
    case Store::kAssign:
      return pointwise_as<Store::kAssign>(box, ai, ao, outs, f, fast, merge && fast);
    case Store::kSum:
      return pointwise_as<Store::kSum>(box, ai, ao, outs, f, fast, merge && fast);
    case Store::kMax:
      return pointwise_as<Store::kMax>(box, ai, ao, outs, f, fast, merge && fast);
    case Store::kMin:
      return pointwise_as<Store::kMin>(box, ai, ao, outs, f, fast, merge && fast);
  }
}

/// True when the causal mask hides the result element at (p, j): key index > query index,
// aligned at the end when the key dim is longer. The coordinates are affine in (p, j); their
// coefficients are copied out of the projection once. With the `zigzag` attribute the query and
// key coordinates are in zigzag order (ir/Zigzag.h) and compare as the positions they hold.
inline int64_t attr_i(const Op& op, const char* name, int64_t def);

struct CausalMask {
  std::vector<int64_t> cq, ck;  // coefficients of the query and key coordinates per index dim
  int64_t q0 = 0, k0 = 0, shift = 0;
  int64_t chunks = 0, eq = 0, ek = 0;  // zigzag chunks (0: in order); query and key extents
  explicit CausalMask(const Op& o) {
    const auto& proj = o.results[0].proj;
    const AffineMap& m = proj.map();
    int64_t r = proj.tensor_rank(), rq = r - 2, rk = r - 1;
    IVec ext = proj.image(o.space.box()).shape();
    shift = ext[rk] - ext[rq];
    eq = ext[rq];
    ek = ext[rk];
    chunks = attr_i(o, kZigzagAttr, 0);
    q0 = m.offset()[rq];
    k0 = m.offset()[rk];
    for (int64_t k = 0; k < m.in_rank(); ++k) {
      cq.push_back(m.at(rq, k));
      ck.push_back(m.at(rk, k));
    }
  }
  /// How many of the n elements from offset j0 of the row at p are visible (not hidden) before
  /// the first hidden one, when the visible ones form a prefix of the row (the key index grows
  /// along it and the query index does not, and in zigzag order the n keys lie in one chunk);
  /// -1 otherwise.
  int64_t visible_prefix(const int64_t* p, int64_t j0, int64_t n) const {
    auto m = static_cast<int64_t>(cq.size());
    if (m == 0 || cq[m - 1] != 0 || ck[m - 1] != 1) return -1;
    // hidden(p, j) <=> k(p) + j > q(p) + shift
    int64_t q = q0, k = k0;
    for (int64_t i = 0; i < m; ++i) {
      q += cq[i] * p[i];
      k += ck[i] * p[i];
    }
    if (chunks > 1) {
      const int64_t c = ek / chunks, first = k + j0;
      if (n > 0 && first / c != (first + n - 1) / c) return -1;
      q = zigzag_position(q, eq, chunks);
      k = zigzag_position(first, ek, chunks) - j0;
    }
    return std::clamp<int64_t>(q + shift - k - j0 + 1, 0, n);
  }
  bool hidden(const int64_t* p, int64_t j) const {
    int64_t q = q0, k = k0, n = static_cast<int64_t>(cq.size());
    for (int64_t i = 0; i < n; ++i) {
      q += cq[i] * p[i];
      k += ck[i] * p[i];
    }
    if (n) {
      q += cq[n - 1] * j;
      k += ck[n - 1] * j;
    }
    if (chunks > 1) return zigzag_position(k, ek, chunks) > zigzag_position(q, eq, chunks) + shift;
    return k > q + shift;
  }
};

/// True when every operand and result of `op` has a unit window.
bool unit_windows(const Op& op);

// Kernel families, one file each.
/// An elementwise op that kernels::chain_fusable accepts, through the fused-chain loop (one op,
/// rows merged over the trailing dims every operand walks regularly).
void run_elementwise(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs);

Status run_pointwise(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs, const KernelOptions& o);
Status run_contraction(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                       const std::vector<Tensor*>& outs, const KernelOptions& o);
Status run_window(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o);
Status run_conv(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                const std::vector<Tensor*>& outs, const KernelOptions& o);
/// The row ops: softmax, log_softmax, layernorm, rmsnorm, cross_entropy, norm_grad, rotary and
/// rotary_grad. run_window computes them whatever their windows, run_rows_fast where it can.
inline bool row_op(OpKind k) {
  switch (k) {
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
    case OpKind::kCrossEntropy:
    case OpKind::kNormGrad:
    case OpKind::kRotary:
    case OpKind::kRotaryGrad:
      return true;
    default:
      return false;
  }
}
/// y = softmax(x) (or log-softmax) over the n floats of a row; returns log(sum exp(x - max)) +
/// max. The exponentials and sums run through the vector loops of Simd.h (fast_exp, float lanes).
float softmax_row(const float* x, float* y, int64_t n, bool log);
/// y = softmax(x) over the n floats of a row, as softmax_row(x, y, n, false) computes it, without
/// the log it returns (a logarithm a row: a short row's softmax spent a tenth of its time there).
void softmax_probs(const float* x, float* y, int64_t n);

/// True when `p` maps each index dim to the same tensor dim with a unit window (an operand read
/// point for point).
bool same_coordinates(const IndexProjection& p);
/// True when value `v` is one of a fused chain's `temporaries` (Chain.cpp).
bool is_temporary(const std::vector<ValueId>& temporaries, ValueId v);
/// True when a call of `calls` from `from` on reads value `v` (Chain.cpp).
bool read_from(const std::vector<kernels::BoundCall>& calls, ValueId v, size_t from);
/// When calls[i] and the calls after it are gradients of one layernorm or rmsnorm (norm_grad of
/// the same fn, eps, inputs and box: dx, the scale's, the shift's, as lowering fuses them): runs
/// them in one pass over the rows, each row's moments computed once and every result stored as
/// its own call would (KernelRows.cpp), sets *end past the last and *status, and returns true.
/// One thread only (a split would change the sums' order); false: nothing ran.
bool run_norm_grads(const std::vector<kernels::BoundCall>& calls, size_t i, const KernelOptions& o,
                    size_t* end, Status* status);

/// When calls[i] is a causal mask, or a scale and the causal mask of its result, and the next call
/// is the softmax over the last dim of the mask's result (what lowering fuses of attention's
/// scale -> causal_mask -> softmax; KernelScoresGrad.cpp): runs them as one pass per row on
/// o.threads threads, sets *end past the softmax and *status to the result, and returns true.
/// The scaled and masked scores must be in `temporaries` and read by no later call; they are
/// never written. False: nothing ran.
bool run_masked_softmax(const std::vector<kernels::BoundCall>& calls, size_t i,
                        const std::vector<ValueId>& temporaries, const KernelOptions& o,
                        size_t* end, Status* status);

/// When calls[i] is softmax's gradient from its output (norm_grad fn=softmax_out) and the next
/// calls are the causal mask's gradient of it and optionally the scale's gradient of that, over
/// whole rows of the scores (KernelScoresGrad.cpp): runs them as one pass per row on o.threads
/// threads, sets *end past the last call covered and *status to the result, and returns true. The
/// values between must be in `temporaries` and read by no later call; they are never written.
/// False: nothing ran.
bool run_scores_grad(const std::vector<kernels::BoundCall>& calls, size_t i,
                     const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                     Status* status);
/// The fast row kernels (KernelRows.cpp) of softmax, log_softmax, layernorm, rmsnorm,
/// cross_entropy, norm_grad, rotary and rotary_grad: true when they computed the call (its status
/// in *status), false (nothing written) for other kinds, padded operands or options.reference.
bool run_rows_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, const KernelOptions& o, Status* status);
/// The im2col + sgemm convolution kernels and the allocation-free pooling loops. Adds into the
/// outputs (which run_conv has reset unless accumulating); false (nothing written) for forms
/// they do not take (integer tensors, a bias operand, dims not named as Ops builds them).
bool run_conv_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs);
/// Concatenation by row copies (KernelConcat.cpp); false (nothing written) for integer tensors
/// and projections other than shifted identities.
bool run_concat_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs);
/// The oneDNN convolution and pooling kernels (KernelDnnl.cpp), on `o.threads` cores. Writes the
/// outputs whole (overwriting them, or adding into them when `o.accumulate` and the op reduces);
/// false (nothing written) for forms they do not take, which fall back to run_conv_fast.
bool run_conv_dnnl(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, const KernelOptions& o);

/// Row-major C = A B (+ C when beta is 1; A transposed when `ta`, B when `tb`) by OpenBLAS, on
/// the threads OpenBLAS is set to use (KernelContraction.cpp).
void sgemm_blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// The most rows of A, and the least depth, skinny_sgemm takes.
constexpr int64_t kSkinnyRows = 2, kSkinnyDepth = 64;
/// Row-major C = A B (+ C when beta is 1) for a B transposed (`tb`) and at most kSkinnyRows rows
/// of A, depth at least kSkinnyDepth, on the calling thread as one dot product per element, B
/// read once (KernelSkinny.cpp); false (nothing written) for other arguments. An element's value
/// does not depend on which columns a call covers.
bool skinny_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// Row-major C = A B (+ C when beta is 1) on the calling thread by heddle's own blocked, packed
/// AVX2 + FMA kernel (KernelGemm.cpp); false (nothing written) on hosts without AVX2 and FMA or
/// for a beta other than 0 or 1. An element's value does not depend on which rows or columns a
/// call covers.
bool packed_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// Row-major C = A B (+ C when beta is 1) on the calling thread by oneDNN's matmul primitive on
/// the operands in place (KernelDnnlMatmul.cpp); false (nothing written) for a beta other than 0
/// or 1, an empty product, or arguments the primitive refuses.
bool matmul_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// matmul_sgemm with a bias: C = A B (+ C when beta is 1) + bias[j] in every row's column j
/// (when `bias` is not null), the bias added to the float product in the primitive's epilogue.
/// False (nothing written) where matmul_sgemm is.
bool matmul_sgemm_bias(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, const float* bias,
                       float* c, int64_t ldc);
/// The bias product_bias adds to a product and where it writes the sum.
struct ProductBias {
  /// The buffer the sum goes to, laid out as the product's own result tile (same region and
  /// strides), instead of that tile.
  float* out = nullptr;
  /// The bias's element at the box start, and its stride along each index dim of the product.
  const float* bias = nullptr;
  std::vector<int64_t> coef;
};
/// An einsum over `box` that is one plain product (no batch dims, operands in place), of at
/// least 2^22 multiply-adds and depth at most 256, on an AVX-512 host, with a bias per column of
/// its result: writes product + bias to pb.out through matmul_sgemm_bias, C's rows split over
/// o.threads threads (KernelContraction.cpp), and returns true; `t`, the product's result tile,
/// is not written. False (nothing written) otherwise.
bool product_bias(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const Tensor& t, const ProductBias& pb, const KernelOptions& o);
/// When calls[i] is such a product whose result only the next call reads and the next call adds
/// a bias per column to it (a linear layer): runs the two as one product_bias, sets *end past the
/// add and *status, and returns true (KernelProductBias.cpp). The product's result must be in
/// `temporaries`; it is never written. False: nothing ran.
bool run_product_bias(const std::vector<kernels::BoundCall>& calls, size_t i,
                      const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                      Status* status);
/// What a causal mask leaves visible of a product, as packed_sgemm_causal reads it: for C's row u
/// (its column u when !outer_rows) the range [0, u + d) when `prefix`, else [u + d, len) of the
/// depths (`on_c` false: the other depths multiply the mask's zeros) or of C's columns (its rows
/// when !outer_rows; `on_c` true: the mask hides C's other elements, as attention's scores).
struct CausalTiles {
  bool outer_rows = true;
  bool prefix = true;
  int64_t d = 0;
  bool on_c = false;
};
/// packed_sgemm over what `vis` leaves visible only. Depths: each 6x16 register tile of C sums
/// the depths visible to some element of it, and a tile with none is set to 0 (beta 0) or left
/// (beta 1), so an element keeps packed_sgemm's value bit for bit where the skipped terms are the
/// mask's zeros (finite operands). C (`on_c`): a tile with no visible element is set to 0 (beta
/// 0) or left, the others are packed_sgemm's. False (nothing written) where packed_sgemm is.
bool packed_sgemm_causal(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                         int64_t ldc, const CausalTiles& vis);
/// Row-major C = A B (+ C when beta is 1) on the calling thread alone, for products already split
/// over the device's threads.
/// Where !kernels::onednn_sgemm_first() (AVX2-only hosts): products of at least 2^22
/// multiply-adds by packed_sgemm; with OpenBLAS set to one thread, products of one or two rows by
/// skinny_sgemm and smaller ones whose m or n is not a multiple of 8 by OpenBLAS. Where it is
/// (AVX-512 hosts): products of at least 2^22 multiply-adds with B transposed and 16-256 rows, or
/// more rows and at most 256 columns, by matmul_sgemm, with A transposed and a depth of at most 256
/// by packed_sgemm. The rest by oneDNN's sgemm (OpenBLAS's when oneDNN refuses the arguments).
void sgemm1(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace heddle::kdetail

namespace heddle::kdetail {

using kernels::KernelOptions;

/// Attribute getters with defaults (ints read as floats where a float is wanted).
inline double attr_f(const Op& op, const char* name, double def) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return def;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}
inline int64_t attr_i(const Op& op, const char* name, int64_t def) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return def;
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
  return def;
}
inline std::string attr_s(const Op& op, const char* name) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return "";
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  return "";
}
inline std::vector<int64_t> attr_ints(const Op& op, const char* name, std::vector<int64_t> def) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return def;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return def;
}

}  // namespace heddle::kdetail
