// Cooperative cancellation: one process-wide flag that long work (searches, solver callbacks,
// executor step loops) polls, and that a signal handler (CLI: SIGINT/SIGTERM) or a front end
// (Python: KeyboardInterrupt) raises. Polling is a relaxed atomic load: cheap enough per step.
#pragma once

namespace heddle {

/// Why work was asked to stop; `kNone` while nothing asked.
enum class CancelReason : int {
  kNone = 0,
  kInterrupt = 2,   ///< SIGINT or Ctrl-C in Python
  kTerminate = 15,  ///< SIGTERM (Slurm's cancel or preemption)
  kRequested = 1,   ///< a caller asked (API, tests)
};

/// Asks all long work in the process to stop soon. Async-signal-safe (a lock-free atomic store);
/// the first reason recorded wins until `clear_cancel()`.
void request_cancel(CancelReason reason = CancelReason::kRequested) noexcept;

/// True once `request_cancel` was called and not cleared. Async-signal-safe.
bool cancel_requested() noexcept;

/// The reason recorded by the first `request_cancel`, or `kNone`.
CancelReason cancel_reason() noexcept;

/// Resets the flag, e.g. before the next Python call or test.
void clear_cancel() noexcept;

}  // namespace heddle
