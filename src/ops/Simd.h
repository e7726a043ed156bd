// Vectorized float loops of the fast kernels: the costly activations (GELU, SiLU, sigmoid,
// tanh-GELU) and their derivatives, and the row reductions of softmax and the norms. Eight lanes
// at a time through GCC vector extensions; on x86-64 each loop is also compiled for AVX2 and
// chosen at load time (target_clones), so a generic build runs 8-wide on the CPUs that have it.
// Every element goes through the same lane arithmetic (a row's tail as a zero-padded vector), so
// a value does not depend on where a tile starts.
#pragma once

#include <cstdint>

#include "heddle/ir/OpKind.h"

namespace heddle::kdetail {

/// True when unary kind `k` has a vectorized loop here (activation_simd, activation_grad_simd).
bool simd_activation(OpKind k);

/// out[j] = k(x[j]) for j < n, as unary_f<k> computes it (Scalar.h) up to rounding. `out` may
/// equal `x`. Precondition: simd_activation(k).
void activation_simd(OpKind k, const float* x, float* out, int64_t n);

/// out[j] = dy[j] * k'(x[j]) for j < n, as unary_deriv_f<k> computes it up to rounding. `out`
/// may equal `dy` or `x`. Precondition: simd_activation(k).
void activation_grad_simd(OpKind k, const float* dy, const float* x, float* out, int64_t n);

/// True when the CPU runs the sixteen-lane activation loops (AVX-512, x86-64-v4; SimdWide.cpp),
/// which activation_simd and activation_grad_simd then take.
bool wide_activations();

/// activation_simd and activation_grad_simd sixteen lanes at a time. Precondition:
/// wide_activations() and simd_activation(k).
void activation_wide(OpKind k, const float* x, float* out, int64_t n);
void activation_grad_wide(OpKind k, const float* dy, const float* x, float* out, int64_t n);

/// The largest of x[0..n) (-inf for n == 0; NaNs are skipped).
float row_max_simd(const float* x, int64_t n);

/// y[j] = e^(x[j] - shift) for j < n (fast_exp's polynomial); returns their sum.
float exp_sum_simd(const float* x, float* y, int64_t n, float shift);

/// Sum of x[0..n).
float row_sum_simd(const float* x, int64_t n);

/// Sum of x[j] * y[j] over j < n.
float row_dot_simd(const float* x, const float* y, int64_t n);

/// Sum of (x[j] - c)^2 over j < n.
float row_sq_dev_simd(const float* x, int64_t n, float c);

/// y[j] = ((x[j] - mean) * rstd) * g[j] + b[j] for j < n, the product and sum left out when g or
/// b is null (a norm's row, in the order of the scalar loop). `y` may equal `x`.
void norm_apply_simd(const float* x, float mean, float rstd, const float* g, const float* b,
                     float* y, int64_t n);

/// r[j] = rstd * (gy[j] - mg - xh[j] * mgx) for j < n (a norm's input gradient). `r` may equal
/// `gy` or `xh`.
void norm_dx_simd(const float* gy, const float* xh, float rstd, float mg, float mgx, float* r,
                  int64_t n);

/// gy[j] = dy[j] * g[j] (dy[j] when g is null) and xh[j] = (x[j] - mean) * rstd for j < n, in
/// one pass; *sum and *dot get row_sum_simd(gy, n) and row_dot_simd(gy, xh, n) bit for bit.
void norm_grad_sums_simd(const float* dy, const float* g, const float* x, float mean, float rstd,
                         float* gy, float* xh, int64_t n, float* sum, float* dot);

/// acc[j] += dy[j] * ((x[j] - mean) * rstd) for j < n (a norm's scale gradient summed over rows),
/// bit for bit the separate products and sums.
void norm_dgamma_simd(const float* dy, const float* x, float mean, float rstd, float* acc,
                      int64_t n);

/// out[j] = a[j] * b[j] for j < n. `out` may equal `a` or `b`.
void row_mul_simd(const float* a, const float* b, float* out, int64_t n);

/// acc[j] += v[j] for j < n. Precondition: the two do not overlap unless equal.
void row_add_to_simd(float* acc, const float* v, int64_t n);

/// y[j] *= c for j < n.
void row_scale_simd(float* y, float c, int64_t n);

/// r[j] = y[j] * (d[j] - s) for j < n (softmax's gradient given its output y and s = d . y). `r`
/// may equal `d` or `y`.
void softmax_grad_simd(const float* d, const float* y, float s, float* r, int64_t n);

/// AdamW's constants for one step: learning rate, betas, epsilon, weight decay and the bias
/// corrections 1 - beta^step.
struct AdamWStep {
  float lr, b1, b2, eps, wd, c1, c2;
};

/// One AdamW update of n parameters p with gradients g and moments m, v, in float:
/// m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2,
/// p' = p - lr ((m' (1 / c1)) / (sqrt(v' (1 / c2)) + eps) + wd p), the bias corrections taken as
/// float factors (two divisions fewer per element). Precondition: the seven arrays do not
/// overlap (a kernel's outputs never share memory with its inputs).
void adamw_simd(const AdamWStep& s, const float* p, const float* g, const float* m, const float* v,
                float* p_out, float* m_out, float* v_out, int64_t n);

}  // namespace heddle::kdetail
