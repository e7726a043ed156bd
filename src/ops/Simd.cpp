// The vectorized loops of Simd.h, eight lanes wide. The lane helpers (SimdLanes.h) are always
// inlined into the cloned loops, so each clone computes them with its own instructions; the
// activations also run sixteen lanes wide where the CPU has AVX-512 (SimdWide.cpp).
#include "Simd.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "Scalar.h"
#include "heddle/support/Assert.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace heddle::kdetail {

namespace {

using vf = float __attribute__((vector_size(32)));
using vi = int32_t __attribute__((vector_size(32)));
using v8 = vf;
using v8i = vi;
constexpr int64_t kLanes = 8;

#include "SimdLanes.h"

#if HEDDLE_MULTIVERSION
#define HEDDLE_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HEDDLE_SIMD_CLONES
#endif

// The loops whose polynomials dominate their time (the activations, softmax's exponentials) are
// also compiled for x86-64-v3, whose FMA contracts their multiply-adds: a third less time on
// Zen4 than the AVX2 clone, one rounding fewer per multiply-add. The other loops (sums, AdamW,
// whose streaming form must match its plain loop bit for bit) keep the clones above.
#if HEDDLE_MULTIVERSION
#define HEDDLE_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "avx2", "default")))
#else
#define HEDDLE_FMA_CLONES
#endif

HEDDLE_FMA_CLONES void activation_loop(OpKind k, const float* x, float* out, int64_t n) {
  activation_rows(k, x, out, n);
}

HEDDLE_FMA_CLONES void activation_grad_loop(OpKind k, const float* dy, const float* x, float* out,
                                            int64_t n) {
  activation_grad_rows(k, dy, x, out, n);
}

// The eight lanes of v added pairwise, in a fixed order.
HEDDLE_LANES float lane_sum(const v8& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

HEDDLE_SIMD_CLONES float max_loop(const float* x, int64_t n) {
  v8 acc;
  splat(acc, -std::numeric_limits<float>::infinity());
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 v;
    if (m == kLanes) {
      load(v, x + j, m);
    } else {
      splat(v, -std::numeric_limits<float>::infinity());
      std::memcpy(&v, x + j, static_cast<size_t>(m) * sizeof(float));
    }
    v8i more = acc < v;  // false for NaN lanes, which are skipped
    select(acc, more, v, acc);
  });
  float r = acc[0];
  for (int i = 1; i < kLanes; ++i) r = std::max(r, acc[i]);
  return r;
}

HEDDLE_FMA_CLONES float exp_sum_loop(const float* x, float* y, int64_t n, float shift) {
  v8 acc = v8{};
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 v;
    load(v, x + j, m);
    v = v - shift;
    // A masked-out score (-inf, a causal mask's) weighs exactly 0, not fast_exp's clamped
    // e^-87.3, so contractions may skip it (ops/CausalOperand.h).
    v8i hidden = v == -std::numeric_limits<float>::infinity();
    vexp(v);
    v8 zero = v8{};
    select(v, hidden, zero, v);
    store(y + j, v, m);
    if (m < kLanes)
      for (int64_t i = m; i < kLanes; ++i) v[i] = 0.0f;
    acc += v;
  });
  return lane_sum(acc);
}

HEDDLE_SIMD_CLONES float sum_loop(const float* x, int64_t n) {
  v8 acc = v8{};
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 v;
    load(v, x + j, m);
    acc += v;
  });
  return lane_sum(acc);
}

HEDDLE_SIMD_CLONES float dot_loop(const float* x, const float* y, int64_t n) {
  v8 acc = v8{};
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a, b;
    load(a, x + j, m);
    load(b, y + j, m);
    acc += a * b;
  });
  return lane_sum(acc);
}

HEDDLE_SIMD_CLONES float sq_dev_loop(const float* x, int64_t n, float c) {
  v8 acc = v8{};
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a;
    load(a, x + j, m);
    a = a - c;
    for (int64_t i = m; i < kLanes; ++i) a[i] = 0.0f;
    acc += a * a;
  });
  return lane_sum(acc);
}

HEDDLE_SIMD_CLONES void norm_apply_loop(const float* x, float mean, float rstd, const float* g,
                                        const float* b, float* y, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 v;
    load(v, x + j, m);
    v = (v - mean) * rstd;
    if (g != nullptr) {
      v8 gv;
      load(gv, g + j, m);
      v = v * gv;
    }
    if (b != nullptr) {
      v8 bv;
      load(bv, b + j, m);
      v = v + bv;
    }
    store(y + j, v, m);
  });
}

// gy = dy * g (dy when g is null) and xh = (x - mean) * rstd, stored; returns the lane sums of gy
// and of gy * xh, as sum_loop and dot_loop would compute them over the stored rows.
HEDDLE_SIMD_CLONES void norm_grad_sums_loop(const float* dy, const float* g, const float* x,
                                            float mean, float rstd, float* gy, float* xh, int64_t n,
                                            float* sum, float* dot) {
  v8 as = v8{}, ad = v8{};
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 d, xv;
    load(d, dy + j, m);
    if (g != nullptr) {
      v8 gv;
      load(gv, g + j, m);
      d = d * gv;
    }
    load(xv, x + j, m);
    xv = (xv - mean) * rstd;
    store(gy + j, d, m);
    store(xh + j, xv, m);
    if (m < kLanes) {  // the padded lanes as the loads of sum_loop and dot_loop see them: 0
      v8 z = v8{};
      std::memcpy(&z, &d, static_cast<size_t>(m) * sizeof(float));
      d = z;
      z = v8{};
      std::memcpy(&z, &xv, static_cast<size_t>(m) * sizeof(float));
      xv = z;
    }
    as += d;
    ad += d * xv;
  });
  *sum = lane_sum(as);
  *dot = lane_sum(ad);
}

// acc[j] += dy[j] * ((x[j] - mean) * rstd): a norm's scale gradient, row by row.
HEDDLE_SIMD_CLONES void norm_dgamma_loop(const float* dy, const float* x, float mean, float rstd,
                                         float* acc, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 d, xv, a;
    load(d, dy + j, m);
    load(xv, x + j, m);
    load(a, acc + j, m);
    store(acc + j, a + d * ((xv - mean) * rstd), m);
  });
}

HEDDLE_SIMD_CLONES void norm_dx_loop(const float* gy, const float* xh, float rstd, float mg,
                                     float mgx, float* r, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a, h;
    load(a, gy + j, m);
    load(h, xh + j, m);
    a = rstd * (a - mg - h * mgx);
    store(r + j, a, m);
  });
}

HEDDLE_SIMD_CLONES void mul_loop(const float* a, const float* b, float* out, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 u, v;
    load(u, a + j, m);
    load(v, b + j, m);
    store(out + j, u * v, m);
  });
}

HEDDLE_SIMD_CLONES void add_to_loop(float* acc, const float* v, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a, u;
    load(a, acc + j, m);
    load(u, v + j, m);
    store(acc + j, a + u, m);
  });
}

HEDDLE_SIMD_CLONES void scale_loop(float* y, float c, int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a;
    load(a, y + j, m);
    store(y + j, a * c, m);
  });
}

HEDDLE_SIMD_CLONES void softmax_grad_loop(const float* d, const float* y, float s, float* r,
                                          int64_t n) {
  for_lanes(n, [&](int64_t j, int64_t m) HEDDLE_LAMBDA {
    v8 a, u;
    load(a, d + j, m);
    load(u, y + j, m);
    store(r + j, u * (a - s), m);
  });
}

// A plain loop the compiler vectorizes (Simd.cpp is built without errno from sqrt; the operands
// are distinct buffers).
HEDDLE_SIMD_CLONES void adamw_loop(const AdamWStep& s, const float* __restrict p,
                                   const float* __restrict g, const float* __restrict m,
                                   const float* __restrict v, float* __restrict p_out,
                                   float* __restrict m_out, float* __restrict v_out, int64_t n) {
  const AdamWStep k = s;
  const float ic1 = 1.0f / k.c1, ic2 = 1.0f / k.c2;  // the bias corrections as factors
  for (int64_t j = 0; j < n; ++j) {
    float pv = p[j], gv = g[j];
    float mv = k.b1 * m[j] + (1.0f - k.b1) * gv;
    float vv = k.b2 * v[j] + (1.0f - k.b2) * gv * gv;
    float upd = (mv * ic1) / (std::sqrt(vv * ic2) + k.eps) + k.wd * pv;
    p_out[j] = pv - k.lr * upd;
    m_out[j] = mv;
    v_out[j] = vv;
  }
}

#if HEDDLE_MULTIVERSION
#define HEDDLE_STREAM_STORES 1
// adamw_loop's arithmetic, operation for operation, eight lanes at a time, with the three results
// written by non-temporal stores: a parameter tensor far larger than the caches is not read into
// them before it is overwritten (the loop above reads every written line first), which leaves 7
// instead of 10 passes over memory. The head (until the outputs are 32-byte aligned) and the tail
// run through adamw_loop. Precondition: the outputs are equally aligned modulo 32 bytes.
__attribute__((target("avx2"))) void adamw_stream(const AdamWStep& s, const float* p,
                                                  const float* g, const float* m, const float* v,
                                                  float* p_out, float* m_out, float* v_out,
                                                  int64_t n) {
  const AdamWStep k = s;
  int64_t head = 0;
  while (head < n && reinterpret_cast<uintptr_t>(p_out + head) % 32 != 0) ++head;
  adamw_loop(k, p, g, m, v, p_out, m_out, v_out, head);
  v8 b1, b2, nb1, nb2, c1, c2, eps, wd, lr;
  splat(b1, k.b1);
  splat(b2, k.b2);
  splat(nb1, 1.0f - k.b1);
  splat(nb2, 1.0f - k.b2);
  splat(c1, 1.0f / k.c1);
  splat(c2, 1.0f / k.c2);
  splat(eps, k.eps);
  splat(wd, k.wd);
  splat(lr, k.lr);
  int64_t j = head;
  for (; j + kLanes <= n; j += kLanes) {
    v8 pv, gv, mv, vv;
    load(pv, p + j, kLanes);
    load(gv, g + j, kLanes);
    load(mv, m + j, kLanes);
    load(vv, v + j, kLanes);
    mv = b1 * mv + nb1 * gv;
    vv = b2 * vv + nb2 * gv * gv;
    v8 root = vv * c2;
    root = reinterpret_cast<v8>(_mm256_sqrt_ps(reinterpret_cast<__m256>(root)));
    v8 upd = (mv * c1) / (root + eps) + wd * pv;
    v8 np = pv - lr * upd;
    _mm256_stream_ps(p_out + j, reinterpret_cast<__m256>(np));
    _mm256_stream_ps(m_out + j, reinterpret_cast<__m256>(mv));
    _mm256_stream_ps(v_out + j, reinterpret_cast<__m256>(vv));
  }
  _mm_sfence();
  adamw_loop(k, p + j, g + j, m + j, v + j, p_out + j, m_out + j, v_out + j, n - j);
}
#endif

}  // namespace

bool simd_activation(OpKind k) {
  return k == OpKind::kGelu || k == OpKind::kSilu || k == OpKind::kSigmoid ||
         k == OpKind::kGeluTanh;
}

void activation_simd(OpKind k, const float* x, float* out, int64_t n) {
  if (wide_activations()) return activation_wide(k, x, out, n);
  activation_loop(k, x, out, n);
}

void activation_grad_simd(OpKind k, const float* dy, const float* x, float* out, int64_t n) {
  if (wide_activations()) return activation_grad_wide(k, dy, x, out, n);
  activation_grad_loop(k, dy, x, out, n);
}

float row_max_simd(const float* x, int64_t n) { return max_loop(x, n); }

float exp_sum_simd(const float* x, float* y, int64_t n, float shift) {
  return exp_sum_loop(x, y, n, shift);
}

float row_sum_simd(const float* x, int64_t n) { return sum_loop(x, n); }

float row_dot_simd(const float* x, const float* y, int64_t n) { return dot_loop(x, y, n); }

float row_sq_dev_simd(const float* x, int64_t n, float c) { return sq_dev_loop(x, n, c); }

void norm_apply_simd(const float* x, float mean, float rstd, const float* g, const float* b,
                     float* y, int64_t n) {
  norm_apply_loop(x, mean, rstd, g, b, y, n);
}

void norm_dx_simd(const float* gy, const float* xh, float rstd, float mg, float mgx, float* r,
                  int64_t n) {
  norm_dx_loop(gy, xh, rstd, mg, mgx, r, n);
}

void norm_grad_sums_simd(const float* dy, const float* g, const float* x, float mean, float rstd,
                         float* gy, float* xh, int64_t n, float* sum, float* dot) {
  norm_grad_sums_loop(dy, g, x, mean, rstd, gy, xh, n, sum, dot);
}

void norm_dgamma_simd(const float* dy, const float* x, float mean, float rstd, float* acc,
                      int64_t n) {
  norm_dgamma_loop(dy, x, mean, rstd, acc, n);
}

void row_mul_simd(const float* a, const float* b, float* out, int64_t n) { mul_loop(a, b, out, n); }

void row_add_to_simd(float* acc, const float* v, int64_t n) { add_to_loop(acc, v, n); }

void row_scale_simd(float* y, float c, int64_t n) { scale_loop(y, c, n); }

void softmax_grad_simd(const float* d, const float* y, float s, float* r, int64_t n) {
  softmax_grad_loop(d, y, s, r, n);
}

}  // namespace heddle::kdetail

namespace heddle::kdetail {

void adamw_simd(const AdamWStep& s, const float* p, const float* g, const float* m, const float* v,
                float* p_out, float* m_out, float* v_out, int64_t n) {
#ifdef HEDDLE_STREAM_STORES
  // Streaming stores pay off when the arrays are far larger than the caches (7 of them, 4 MiB
  // each at this length, beyond a 32 MiB L3); below that the next reader finds them cached.
  auto mis = [](const float* q) { return reinterpret_cast<uintptr_t>(q) % 32; };
  if (n >= (int64_t{1} << 20) && mis(p_out) == mis(m_out) && mis(p_out) == mis(v_out) &&
      mis(p_out) % 4 == 0 && __builtin_cpu_supports("avx2"))
    return adamw_stream(s, p, g, m, v, p_out, m_out, v_out, n);
#endif
  adamw_loop(s, p, g, m, v, p_out, m_out, v_out, n);
}

}  // namespace heddle::kdetail
