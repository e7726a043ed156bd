// digest_64, the digest of results and parameters: a function of the bytes alone, changed by a
// change of any byte (in a whole lane word or in the tail), continued by its `h` argument.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "heddle/support/Hash.h"

namespace heddle {
namespace {

TEST(Hash, DigestChangesWithAnyByteAndNotOtherwise) {
  std::mt19937 rng(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{100},
                   size_t{4096 + 5}}) {
    SCOPED_TRACE(n);
    std::vector<unsigned char> a(n);
    for (auto& x : a) x = static_cast<unsigned char>(rng());
    const std::vector<unsigned char> copy = a;
    const uint64_t d = digest_64(a.data(), n);
    EXPECT_EQ(digest_64(copy.data(), n), d);
    std::set<uint64_t> seen = {d};
    for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 40)) {
      for (unsigned bit : {0u, 7u}) {
        a[i] ^= static_cast<unsigned char>(1u << bit);
        seen.insert(digest_64(a.data(), n));  // every flipped byte gives a digest of its own
        a[i] ^= static_cast<unsigned char>(1u << bit);
      }
    }
    const size_t flips = n == 0 ? 0 : 2 * ((n - 1) / std::max<size_t>(1, n / 40) + 1);
    EXPECT_EQ(seen.size(), 1 + flips);
    EXPECT_EQ(digest_64(a.data(), n), d);
  }
}

TEST(Hash, DigestContinuesFromItsSeedAndSeesLength) {
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(digest_64(zeros.data(), 32), digest_64(zeros.data(), 64));
  EXPECT_NE(digest_64(zeros.data(), 64), digest_64(zeros.data(), 64, 12345));
  // Two buffers digested one after the other depend on the order.
  const std::vector<unsigned char> ones(40, 1);
  const uint64_t ab = digest_64(ones.data(), 40, digest_64(zeros.data(), 64));
  const uint64_t ba = digest_64(zeros.data(), 64, digest_64(ones.data(), 40));
  EXPECT_NE(ab, ba);
}

}  // namespace
}  // namespace heddle
