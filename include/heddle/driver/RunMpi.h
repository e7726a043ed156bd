// A run request on MPI ranks, one process per device (started by mpirun or srun): every rank
// prepares the run itself (the same, deterministically), the ranks agree that they were started
// alike (arguments, model, input files, binary; then the plan, which rank 0 makes for
// `--strategy auto`), resume the checkpoint (each rank reading only the shards it needs), run
// their device's program or pipeline stage (heddle/runtime/MpiRun.h) and agree that the run
// completed; rank 0 returns the summary. Beside run_threads() (RunRequest.h), sharing its
// preparation, step loop options, reference check and checkpoints.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "heddle/driver/RunRequest.h"
#include "heddle/runtime/MpiRun.h"

namespace heddle::driver {

/// What a front end adds to run_mpi().
struct MpiRunHooks {
  /// Reports this rank's failure (on stderr, with the rank's prefix) and returns its exit code.
  /// Called on the rank that failed before the ranks learn of it. Default: log_failure().
  std::function<int(const Diagnostic& d, FailureKind kind)> report;
  /// The arguments that change what the run computes in one canonical line (the launch
  /// agreement's first part: ranks started with others refuse). Default empty.
  std::string arguments;
  /// The model inputs in graph-input order, read before any message (every rank reads them
  /// whole and cuts its tiles). Default: random from seed + 1.
  std::function<Result<std::vector<Tensor>>(const Graph& g)> inputs;
  /// Rank 0 writes the single output (`--output`): the model must have one, and pp = 1 (a
  /// pipeline's ranks generate their tiles from the seed). Default false.
  bool output = false;
  /// Seconds a collective may wait for its peers (> 0; default 60).
  double timeout_s = 60;
  /// Called on rank 0 after each step. Default none.
  StepHook on_step;
};

/// What one rank's run ends with.
struct MpiRun {
  /// 0 when the run completed on every rank; else the exit code of the failure, already
  /// reported (hooks.report on the rank that failed, a note naming it on the others).
  int exit_code = 0;
  /// Rank 0, completed: the summary, every output whole in `result.outputs` (its `check`
  /// points into `check`).
  std::optional<RunSummary> summary;
  std::unique_ptr<CheckErrors> check;  ///< rank 0 with the reference check only
  std::optional<Tensor> output;        ///< rank 0 with hooks.output: the single output, whole
};

/// Settles `backend`: the one asked for, else `mpi` under an MPI launcher that started several
/// ranks (said at log level info), else `threads`. Diagnostics: an unknown backend; `threads`
/// under a launcher with several ranks (each would run the whole job).
Status choose_backend(std::string& backend);

/// Runs `r` on this MPI rank: `loaded` (or why it could not be loaded: reported, and every rank
/// stops) is verified and prepared (prepare_run()); MPI starts; the launch, plan and checkpoint
/// agreements; the rank's steps with the reference check (rank 0) and the checkpoint writer
/// (every rank writes its shards); the completion agreement. Failures that leave the ranks out
/// of step end the job (runtime fail_job()). Collective over the ranks mpirun started.
MpiRun run_mpi(const RunRequest& r, Result<model::LoadedModel> loaded, const MpiRunHooks& hooks);

}  // namespace heddle::driver
