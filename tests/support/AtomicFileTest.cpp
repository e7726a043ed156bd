// Atomic writes: a failed write leaves the previous file intact and no temporary behind, and the
// message carries the system's reason; the writability checks refuse before anything is written.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "heddle/support/AtomicFile.h"

namespace heddle {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/atomic_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

size_t entries(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {}));
}

TEST(AtomicFile, WritesAndReplacesWholeFiles) {
  std::string d = fresh_dir("write");
  ASSERT_TRUE(write_file_atomic(d + "/a.txt", "first").ok());
  EXPECT_EQ(slurp(d + "/a.txt"), "first");
  ASSERT_TRUE(write_file_atomic(d + "/a.txt", "second, longer").ok());
  EXPECT_EQ(slurp(d + "/a.txt"), "second, longer");
  EXPECT_EQ(entries(d), 1u) << "no temporary left behind";
}

TEST(AtomicFile, AnAbandonedFileLeavesThePreviousContents) {
  std::string d = fresh_dir("abandon");
  ASSERT_TRUE(write_file_atomic(d + "/a.txt", "good").ok());
  {
    auto f = AtomicFile::open(d + "/a.txt");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("partial").ok());
    EXPECT_EQ(entries(d), 2u) << "the temporary sits beside the target";
  }  // destroyed without commit(): an error path or an exception
  EXPECT_EQ(slurp(d + "/a.txt"), "good");
  EXPECT_EQ(entries(d), 1u);
}

TEST(AtomicFile, AFailedWriteSaysWhyAndKeepsThePreviousFile) {
  // A file-size limit makes write() fail with EFBIG, as a full disk fails with ENOSPC.
  std::string d = fresh_dir("full");
  ASSERT_TRUE(write_file_atomic(d + "/a.npy", "previous").ok());
  struct rlimit old {};
  getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Status st = write_file_atomic(d + "/a.npy", std::string(100000, 'x'));
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().loc.file, d + "/a.npy");
  EXPECT_NE(st.error().message.find("File too large"), std::string::npos) << st.error().message;
  EXPECT_EQ(slurp(d + "/a.npy"), "previous");
  EXPECT_EQ(entries(d), 1u);
}

TEST(AtomicFile, AMissingDirectoryIsReportedWithTheSystemsReason) {
  Status st = write_file_atomic("/nonexistent-heddle-dir/x.txt", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().to_string().find("No such file or directory"), std::string::npos)
      << st.error().to_string();
}

TEST(AtomicFile, WritabilityChecksRefuseBeforeWriting) {
  std::string d = fresh_dir("check");
  EXPECT_TRUE(check_writable_file(d + "/out.npy").ok());
  EXPECT_TRUE(check_writable_dir(d).ok());
  EXPECT_TRUE(check_writable_dir(d + "/new").ok()) << "creatable";
  EXPECT_FALSE(fs::exists(d + "/new")) << "a check creates nothing";
  auto missing = check_writable_file(d + "/no/out.npy", "--output");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("--output"), std::string::npos);
  EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos);
  EXPECT_FALSE(check_writable_file(d).ok()) << "a directory is no file";
  EXPECT_FALSE(check_writable_dir(d + "/a/b").ok()) << "the parent is missing";
  ASSERT_TRUE(write_file_atomic(d + "/plain", "x").ok());
  EXPECT_FALSE(check_writable_dir(d + "/plain").ok()) << "a file is no directory";
  if (geteuid() != 0) {  // root writes anywhere
    chmod(d.c_str(), 0555);
    EXPECT_FALSE(check_writable_file(d + "/out.npy").ok());
    chmod(d.c_str(), 0755);
  }
  ASSERT_TRUE(make_dirs(d + "/x/y/z").ok());
  EXPECT_TRUE(fs::is_directory(d + "/x/y/z"));
}

}  // namespace
}  // namespace heddle
