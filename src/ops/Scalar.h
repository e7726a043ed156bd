// Private scalar math of the elementwise kinds and their local derivatives, shared by the forward
// and gradient kernels.
#pragma once

#include <cmath>
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

/// Float versions of the costly activations (erff/expf/tanhf instead of their double forms); the
/// other kinds compute as the reference does.
template <OpKind K>
inline float unary_f(float x, double alpha) {
  if constexpr (K == OpKind::kGelu) {
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678f));
  } else if constexpr (K == OpKind::kSilu) {
    return x / (1.0f + std::exp(-x));
  } else if constexpr (K == OpKind::kGeluTanh) {
    constexpr auto c = static_cast<float>(kSqrt2OverPi), a = static_cast<float>(kGeluC);
    return 0.5f * x * (1.0f + std::tanh(c * (x + a * x * x * x)));
  } else {
    return static_cast<float>(unary_value(K, x, alpha));
  }
}

/// d unary_f<K>(x) / dx, in float for GELU and SiLU.
template <OpKind K>
inline float unary_deriv_f(float x, double alpha) {
  if constexpr (K == OpKind::kGelu) {
    float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678f));
    return cdf + x * std::exp(-0.5f * x * x) * 0.39894228f;
  } else if constexpr (K == OpKind::kSilu) {
    float s = 1.0f / (1.0f + std::exp(-x));
    return s * (1.0f + x * (1.0f - s));
  } else {
    return static_cast<float>(unary_deriv(K, x, alpha));
  }
}

}  // namespace heddle::kdetail
