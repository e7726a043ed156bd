// Byte sizes as written on a command line.
#include <gtest/gtest.h>

#include "heddle/support/ByteSize.h"

namespace heddle {
namespace {

TEST(ByteSize, UnitsAndPlainNumbers) {
  EXPECT_EQ(*parse_bytes("80GiB"), 80.0 * 1073741824.0);
  EXPECT_EQ(*parse_bytes("16GB"), 16e9);
  EXPECT_EQ(*parse_bytes("1.5e9"), 1.5e9);
  EXPECT_EQ(*parse_bytes("512B"), 512.0);
  EXPECT_EQ(*parse_bytes("2KiB"), 2048.0);
}

TEST(ByteSize, NotASizeNamesWhatGaveIt) {
  for (const char* bad : {"", "GiB", "-1GB", "0", "12 GB", "1e999", "nan", "abc"}) {
    auto r = parse_bytes(bad, "--host-memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message, std::string("--host-memory '") + bad +
                                     "' is not a size; use e.g. 80GiB, 16GB or 1e10");
  }
}

}  // namespace
}  // namespace heddle
