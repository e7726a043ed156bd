// The exit codes of the `heddle` command, one per class of failure (docs/cli.md), and the map
// from a diagnostic's FailureKind to them. Scripts and schedulers (Slurm requeue rules) branch on
// these, so they are stable.
#pragma once

#include <cstdint>

#include "heddle/support/Cancel.h"

namespace heddle {

/// The class of a failure, which front ends map to an exit code: most failures are the user's
/// mistake; a run can also fail its check, time out waiting for a peer, lose a peer, or be
/// cancelled (support/Cancel.h).
enum class FailureKind : uint8_t {
  kUser = 0,       ///< bad input or an infeasible request (exit 1)
  kCheckMismatch,  ///< --check found outputs that differ from the reference
  kTimeout,        ///< a wait for peers ran past its limit
  kPeerLost,       ///< another process of the job failed or vanished
  kCancelled,      ///< stopped by request (SIGINT, SIGTERM, request_cancel)
  kInternal,       ///< a broken invariant
};

/// Exit codes of the CLI. 130 and 143 follow the shell's 128 + signal convention.
enum class ExitCode : int {
  kOk = 0,
  kUserError = 1,      ///< bad input or an infeasible request
  kInternalError = 2,  ///< a bug in heddle (an assert, an unexpected exception)
  kCheckMismatch = 3,  ///< `run --check`: outputs differ from the reference beyond tolerance
  kTimeout = 4,        ///< MPI: a wait for peers ran past --timeout
  kPeerLost = 5,       ///< MPI: another rank failed or its process vanished
  kInterrupted = 130,  ///< SIGINT (Ctrl-C)
  kTerminated = 143,   ///< SIGTERM (Slurm's scancel, preemption, mpirun stopping the job)
};

/// The exit code of a cancellation with `reason`: 130 for SIGINT, 143 for SIGTERM, else 130.
constexpr ExitCode exit_code_of(CancelReason reason) {
  return reason == CancelReason::kTerminate ? ExitCode::kTerminated : ExitCode::kInterrupted;
}

/// The exit code of a failure of kind `k`; kCancelled maps through the recorded cancel reason.
inline ExitCode exit_code_of(FailureKind k) {
  switch (k) {
    case FailureKind::kUser:
      return ExitCode::kUserError;
    case FailureKind::kCheckMismatch:
      return ExitCode::kCheckMismatch;
    case FailureKind::kTimeout:
      return ExitCode::kTimeout;
    case FailureKind::kPeerLost:
      return ExitCode::kPeerLost;
    case FailureKind::kCancelled:
      return exit_code_of(cancel_reason());
    case FailureKind::kInternal:
      return ExitCode::kInternalError;
  }
  return ExitCode::kInternalError;
}

/// The process exit status of `c`.
constexpr int to_int(ExitCode c) { return static_cast<int>(c); }

}  // namespace heddle
