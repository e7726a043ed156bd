// Private scalar math of the elementwise kinds and their local derivatives, shared by the forward
// and gradient kernels.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "heddle/ir/OpKind.h"

namespace heddle::kdetail {

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluC = 0.044715;

/// Forward value of unary kind `k` (alpha for scale).
inline double unary_value(OpKind k, double x, double alpha) {
  switch (k) {
    case OpKind::kRelu:
      return x > 0 ? x : 0.0;
    case OpKind::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case OpKind::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x)));
    case OpKind::kSilu:
      return x * sigmoid(x);
    case OpKind::kSigmoid:
      return sigmoid(x);
    case OpKind::kTanh:
      return std::tanh(x);
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kRsqrt:
      return 1.0 / std::sqrt(x);
    case OpKind::kNeg:
      return -x;
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kSquare:
      return x * x;
    case OpKind::kReciprocal:
      return 1.0 / x;
    case OpKind::kScale:
      return alpha * x;
    default:  // cast, identity
      return x;
  }
}

/// d unary(x) / dx.
inline double unary_deriv(OpKind k, double x, double alpha) {
  switch (k) {
    case OpKind::kRelu:
      return x > 0 ? 1.0 : 0.0;
    case OpKind::kGelu: {
      double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
      return cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    }
    case OpKind::kGeluTanh: {
      double t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
      return 0.5 * (1.0 + t) +
             0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluC * x * x);
    }
    case OpKind::kSilu: {
      double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
    case OpKind::kSigmoid: {
      double s = sigmoid(x);
      return s * (1.0 - s);
    }
    case OpKind::kTanh: {
      double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return 1.0 / x;
    case OpKind::kSqrt:
      return 0.5 / std::sqrt(x);
    case OpKind::kRsqrt:
      return -0.5 / (x * std::sqrt(x));
    case OpKind::kNeg:
      return -1.0;
    case OpKind::kAbs:
      return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case OpKind::kSquare:
      return 2.0 * x;
    case OpKind::kReciprocal:
      return -1.0 / (x * x);
    case OpKind::kScale:
      return alpha;
    default:
      return 1.0;
  }
}

/// Forward value of binary kind `k`.
inline double binary_value(OpKind k, double a, double b) {
  switch (k) {
    case OpKind::kAdd:
      return a + b;
    case OpKind::kSub:
      return a - b;
    case OpKind::kMul:
      return a * b;
    case OpKind::kDiv:
      return a / b;
    case OpKind::kMaximum:
      return std::max(a, b);
    case OpKind::kMinimum:
      return std::min(a, b);
    case OpKind::kPow:
      return std::pow(a, b);
    default:
      return 0.0;
  }
}

/// d binary(a, b) / d(a if wrt == 0 else b). Ties of maximum/minimum go to a.
inline double binary_deriv(OpKind k, double a, double b, int wrt) {
  switch (k) {
    case OpKind::kAdd:
      return 1.0;
    case OpKind::kSub:
      return wrt == 0 ? 1.0 : -1.0;
    case OpKind::kMul:
      return wrt == 0 ? b : a;
    case OpKind::kDiv:
      return wrt == 0 ? 1.0 / b : -a / (b * b);
    case OpKind::kMaximum:
      return (wrt == 0) == (a >= b) ? 1.0 : 0.0;
    case OpKind::kMinimum:
      return (wrt == 0) == (a <= b) ? 1.0 : 0.0;
    case OpKind::kPow:
      return wrt == 0 ? b * std::pow(a, b - 1.0) : std::pow(a, b) * std::log(a);
    default:
      return 0.0;
  }
}

/// e^x in float without a libm call, so loops over it vectorize: Cephes' expf (x = n ln2 + r,
/// a degree-6 polynomial in r, 2^n put into the exponent bits), within 2 ulp of expf on
/// [-87.3, 88.3]; x is clamped to that range (e^x of x beyond it is 1e-38 or 2e38, not 0 or inf).
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.3f), 88.3f);
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float t = x * 1.44269504088896341f + kShift;
  int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift);
  float fn = t - kShift;
  float r = x - fn * 0.693359375f + fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * r * r + r + 1.0f;
  return e * std::bit_cast<float>((n + 127) << 23);
}

/// The rational part of fast_erf, in place, on x already clamped to [-4, 4]: one float, or a
/// vector of floats (the lanes of Simd.cpp), through the same operations.
template <class T>
[[gnu::always_inline]] inline void erf_rational(T& x) {
  T x2 = x * x;
  T p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  T q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  x = p / q;
}

/// erf(x) in float without a libm call: the rational approximation of Eigen and XLA (odd degree-13
/// numerator over even degree-8 denominator on x clamped to [-4, 4]), within a few ulp of erff.
inline float fast_erf(float x) {
  x = std::min(std::max(x, -4.0f), 4.0f);
  erf_rational(x);
  return x;
}

/// Abramowitz and Stegun 7.1.26 in terms of x = z * sqrt(2): for x >= 0 the normal cdf is
/// 1 - h and for x < 0 it is h, h = 0.5 (a1 t + ... + a5 t^5) e^(-x^2 / 2), t = 1 / (1 + p |x|)
/// (absolute error below 1e-7). GELU's gradient takes its cdf so, from the exponential its
/// density needs anyway.
inline constexpr float kCdfP = 0.2316419f, kCdfA1 = 0.254829592f, kCdfA2 = -0.284496736f,
                       kCdfA3 = 1.421413741f, kCdfA4 = -1.453152027f, kCdfA5 = 1.061405429f;

/// The normal cdf at x given e = e^(-x^2 / 2) (fast_exp's), as above.
inline float gelu_cdf_tail(float x, float e) {
  float t = 1.0f / (1.0f + kCdfP * std::fabs(x));
  float h = 0.5f * (t * (kCdfA1 + t * (kCdfA2 + t * (kCdfA3 + t * (kCdfA4 + t * kCdfA5))))) * e;
  return x < 0.0f ? h : 1.0f - h;
}

/// Float versions of the costly activations (fast_erf/fast_exp instead of the double forms, so
/// the loops vectorize); the other kinds compute as the reference does.
template <OpKind K>
inline float unary_f(float x, double alpha) {
  if constexpr (K == OpKind::kGelu) {
    return 0.5f * x * (1.0f + fast_erf(x * 0.70710678f));
  } else if constexpr (K == OpKind::kSilu) {
    return x / (1.0f + fast_exp(-x));
  } else if constexpr (K == OpKind::kSigmoid) {
    return 1.0f / (1.0f + fast_exp(-x));
  } else if constexpr (K == OpKind::kGeluTanh) {
    constexpr auto c = static_cast<float>(kSqrt2OverPi), a = static_cast<float>(kGeluC);
    float y = c * (x + a * x * x * x);
    return 0.5f * x * (2.0f - 2.0f / (fast_exp(2.0f * y) + 1.0f));  // 1 + tanh(y)
  } else {
    return static_cast<float>(unary_value(K, x, alpha));
  }
}

/// d unary_f<K>(x) / dx, in float for GELU, SiLU and the sigmoid.
template <OpKind K>
inline float unary_deriv_f(float x, double alpha) {
  if constexpr (K == OpKind::kGelu) {
    float e = fast_exp(-0.5f * x * x);
    return gelu_cdf_tail(x, e) + x * e * 0.39894228f;
  } else if constexpr (K == OpKind::kSilu) {
    float s = 1.0f / (1.0f + fast_exp(-x));
    return s * (1.0f + x * (1.0f - s));
  } else if constexpr (K == OpKind::kSigmoid) {
    float s = 1.0f / (1.0f + fast_exp(-x));
    return s * (1.0f - s);
  } else {
    return static_cast<float>(unary_deriv(K, x, alpha));
  }
}

}  // namespace heddle::kdetail
