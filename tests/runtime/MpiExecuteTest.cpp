// Starts MpiExecuteMain under `mpirun -np 4` (loopback): random graphs and plans on MPI ranks equal
// the threaded executor bit for bit.
#include <gtest/gtest.h>

#include "common/RunCli.h"

namespace heddle {
namespace {

TEST(MpiExecute, RandomGraphsAndPlansMatchTheThreadedExecutorBitForBit) {
  std::string cmd =
      "env OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe "
      "--allow-run-as-root "
      "--mca btl self,vader -np 4 " +
      std::string(HEDDLE_BINARY_DIR) + "/tests/runtime/mpi_execute_main 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("mismatches 0,"), std::string::npos) << out;
}

}  // namespace
}  // namespace heddle
