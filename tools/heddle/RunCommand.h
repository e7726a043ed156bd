// `heddle run`'s flags and what both backends (RunCommand.cpp: threads, MpiRun.cpp: MPI ranks)
// print. The arguments, their checks and the run are the driver's (heddle/driver/RunArguments.h,
// RunRequest.h, RunMpi.h).
#pragma once

#include <optional>
#include <vector>

#include "heddle/driver/RunArguments.h"
#include "heddle/driver/RunRequest.h"

namespace heddle::cli {

/// Everything `heddle run` was asked for.
struct RunOptions {
  driver::RunArguments args;  ///< what to run
  bool json = false;          ///< --json: print one JSON object (default off)
};

/// The --input and --labels files read (runtime read_input_files(), non-finite values an error
/// with --check), warnings printed to stderr. Both backends.
Result<std::vector<Tensor>> read_input_files(const Graph& g, const RunOptions& o);

/// Prints step `step`'s loss (training, without --json) and logs it (`loss` too when
/// `log_loss`).
void print_step(const RunOptions& o, int step, std::optional<float> loss, bool log_loss);

/// Prints the summary of a run (text, or JSON with --json); returns 0, or 3 after a mismatch
/// (also reported on stderr).
int report_run(const RunOptions& o, const driver::RunSummary& s);

/// `heddle run --backend mpi`, one process per device under mpirun (MpiRun.cpp).
int run_mpi(const RunOptions& o);

}  // namespace heddle::cli
