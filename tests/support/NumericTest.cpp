// Saturating conversions from double: every input, the out-of-range ones included, is defined.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "heddle/support/Numeric.h"

namespace heddle {
namespace {

TEST(Numeric, Int64TruncatesInRangeAndSaturatesOutside) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(saturating_int64(2.9), 2);
  EXPECT_EQ(saturating_int64(-2.9), -2);
  EXPECT_EQ(saturating_int64(0.0), 0);
  EXPECT_EQ(saturating_int64(std::ldexp(1.0, 62)), int64_t{1} << 62);
  EXPECT_EQ(saturating_int64(std::ldexp(1.0, 63)), kMax);   // one past the range
  EXPECT_EQ(saturating_int64(-std::ldexp(1.0, 63)), kMin);  // exactly representable
  EXPECT_EQ(saturating_int64(1e300), kMax);
  EXPECT_EQ(saturating_int64(-1e300), kMin);
  EXPECT_EQ(saturating_int64(INFINITY), kMax);
  EXPECT_EQ(saturating_int64(-INFINITY), kMin);
  EXPECT_EQ(saturating_int64(NAN), 0);
}

TEST(Numeric, FloatRoundsInRangeAndOverflowsToInfinity) {
  EXPECT_EQ(saturating_float(0.5), 0.5f);
  EXPECT_EQ(saturating_float(1.0 / 3.0), static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(saturating_float(std::numeric_limits<float>::max()), std::numeric_limits<float>::max());
  EXPECT_EQ(saturating_float(1e300), INFINITY);
  EXPECT_EQ(saturating_float(-1e300), -INFINITY);
  EXPECT_EQ(saturating_float(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(saturating_float(NAN)));
  EXPECT_EQ(saturating_float(1e-300), 0.0f);  // underflow is defined: rounds to zero
}

}  // namespace
}  // namespace heddle
