// General slicing end to end (issue #23): the stencil written as an index sum, the reversal, the
// wide halos and the attention example on a mesh of 6 are split by propagation (`heddle show`
// gives the op a mesh axis, not `{x: -}`) and `heddle run --check` matches the reference on
// threads and on MPI ranks, whose outputs equal the threads' bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/RunMpi.h"

namespace heddle {
namespace {

struct SliceCase {
  const char* file;  // relative to the source tree
  int devices;
  const char* op;  // `%name = kind {x: ` of the op that must be split
};

TEST(MpiSliceCli, GeneralSlicesAreSplitAndMatchTheReferenceOnThreadsAndMpi) {
  const SliceCase cases[] = {
      {"examples/slicing/stencil_sum.hd", 4, "%s = reduce_sum {x: "},
      {"examples/slicing/reversal.hd", 4, "%r = identity {x: "},
      {"examples/slicing/wide_halo.hd", 6, "%m = reduce_max {x: "},
      {"examples/slicing/wide_halo.hd", 6, "%s = reduce_sum {x: "},
      {"examples/attention.hd", 6, "%scores = einsum {x: "},
  };
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  for (const auto& c : cases) {
    std::string file = testing::source_dir() + "/" + c.file;
    std::string mesh = " --mesh " + std::to_string(c.devices);
    auto show = testing::run_heddle("show " + file + mesh);
    ASSERT_EQ(show.exit_code, 0) << show.err;
    size_t at = show.out.find(c.op);
    ASSERT_NE(at, std::string::npos) << show.out;
    EXPECT_NE(show.out.substr(at + std::string(c.op).size(), 1), "-")
        << c.file << mesh << " left the op replicated:\n"
        << show.out;
    std::string args = "run " + file + mesh + " --check --json";
    auto threads = testing::run_heddle(args);
    auto mpi = testing::mpirun(c.devices, args + " --backend mpi");
    ASSERT_EQ(threads.exit_code, 0) << args << "\n" << threads.err;
    ASSERT_EQ(mpi.r.exit_code, 0) << args << " (mpi)\n" << mpi.r.err;
    auto jt = nlohmann::json::parse(threads.out), jm = nlohmann::json::parse(mpi.r.out);
    EXPECT_TRUE(jt["ok"].get<bool>()) << args;
    EXPECT_TRUE(jm["ok"].get<bool>()) << args << " (mpi)";
    EXPECT_EQ(jm["backend"], "mpi") << args;
    EXPECT_EQ(jm["output_digest"], jt["output_digest"]) << args << ": mpi differs from threads";
  }
}

}  // namespace
}  // namespace heddle
