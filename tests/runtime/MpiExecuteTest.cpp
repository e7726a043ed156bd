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
      std::string(HEDDLE_BINARY_DIR) + "/tests/runtime/mpi_execute_main";
  const testing::CliResult r = testing::run_shell(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0,"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace heddle
