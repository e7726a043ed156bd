#include <gtest/gtest.h>

#include "heddle/support/Result.h"
#include "heddle/support/Strings.h"

namespace heddle {
namespace {

TEST(Diagnostic, FormatsWithAndWithoutLocation) {
  EXPECT_EQ(Diagnostic("bad thing").to_string(), "error: bad thing");
  EXPECT_EQ(Diagnostic(SourceLoc{"a.hd", 3, 7}, "bad").to_string(), "a.hd:3:7: error: bad");
  EXPECT_EQ(Diagnostic(SourceLoc{"a.hd", 3, 0}, "bad").to_string(), "a.hd:3: error: bad");
  EXPECT_EQ(Diagnostic(SourceLoc{"a.hd", 0, 0}, "bad").to_string(), "a.hd: error: bad");
}

Result<int> half(int x) {
  if (x % 2) return Diagnostic("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  auto h = half(x);
  HEDDLE_TRY(h);
  return half(*h);
}

TEST(Result, CarriesValueOrError) {
  EXPECT_EQ(*half(8), 4);
  EXPECT_FALSE(half(3).ok());
  EXPECT_EQ(half(3).error().message, "odd: 3");
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).error().message, "odd: 3");
  EXPECT_EQ(quarter(5).error().message, "odd: 5");
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  EXPECT_DEATH((void)half(3).value(), "value\\(\\) of a failed Result: error: odd: 3");
}

TEST(Strings, ParseIntRejectsJunk) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_EQ(parse_int("+7"), 7);
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int("4x"));
  EXPECT_FALSE(parse_int("99999999999999999999"));
}

TEST(Strings, HumanUnits) {
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(1234567), "1.23M");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
}

TEST(Strings, DivisorsTextListsTheSmallestSixteenDivisorsInOrder) {
  auto naive = [](int64_t n) {  // every candidate in turn
    std::vector<std::string> d;
    for (int64_t k = 1; k <= n && d.size() < 16; ++k)
      if (n % k == 0) d.push_back(std::to_string(k));
    return join(d, ", ");
  };
  for (int64_t n = 0; n <= 3000; ++n) EXPECT_EQ(divisors_text(n), naive(n)) << n;
  for (int64_t n : {50257, 12288, 65536, 1000000, 720720}) EXPECT_EQ(divisors_text(n), naive(n));
  EXPECT_EQ(divisors_text(12), "1, 2, 3, 4, 6, 12");
  EXPECT_EQ(divisors_text(int64_t{1} << 40), naive(int64_t{1} << 15));  // 1, 2, ..., 32768
}

}  // namespace
}  // namespace heddle
