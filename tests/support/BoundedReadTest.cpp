// Bounded reads: regular files over the bound are refused from their size, endless streams after
// the bound; the message names the file and the bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "heddle/support/BoundedRead.h"

namespace heddle {
namespace {

TEST(BoundedRead, ReadsAWholeFileWithinTheBound) {
  std::string p = ::testing::TempDir() + "/bounded_" + std::to_string(getpid());
  std::ofstream(p) << "hello";
  auto r = read_file_bounded(p, {.max_bytes = 5, .what = "file", .raise_with = ""});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, "hello");
  auto over = read_file_bounded(p, {.max_bytes = 4, .what = "model file", .raise_with = "--x"});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().loc.file, p);
  EXPECT_NE(over.error().message.find("model file"), std::string::npos);
  EXPECT_NE(over.error().message.find("(4 bytes)"), std::string::npos) << over.error().message;
  EXPECT_NE(over.error().message.find("--x"), std::string::npos);
  std::remove(p.c_str());
}

TEST(BoundedRead, AnEndlessStreamStopsAtTheBound) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = read_file_bounded("/dev/zero", {.max_bytes = 1 << 20, .what = "file", .raise_with = ""});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("1.00 MiB"), std::string::npos) << r.error().message;
  EXPECT_LT(s, 1.0);
}

TEST(BoundedRead, MissingFilesAndDirectoriesSayWhy) {
  auto missing = read_file_bounded("/nonexistent-heddle-file");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("No such file or directory"), std::string::npos);
  auto dir = read_file_bounded("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("directory"), std::string::npos);
}

}  // namespace
}  // namespace heddle
