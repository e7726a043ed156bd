// Conversions from double that are defined for every input: out-of-range values saturate instead
// of being undefined behaviour (C++ leaves float-to-int and double-to-float overflow undefined).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace heddle {

/// `v` truncated toward zero as an int64, clamped to int64's range; NaN gives 0.
inline int64_t saturating_int64(double v) {
  if (std::isnan(v)) return 0;
  // 2^63 is exactly representable; every double below it converts without overflow.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (v >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (v < -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

/// `v` rounded to float as IEEE 754 does: beyond float's range gives +-infinity, NaN stays NaN.
inline float saturating_float(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (v > kMax) return std::numeric_limits<float>::infinity();
  if (v < -kMax) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);
}

}  // namespace heddle
