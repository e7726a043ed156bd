// SIGINT and SIGTERM as cancellation for a command-line process: the first signal asks all work
// to stop (Cancel.h) and starts a watchdog that ends the process if the work has not stopped by
// itself within a grace period; a second signal ends it at once. The exit codes are the CLI
// contract's (ExitCode.h: 130 for SIGINT, 143 for SIGTERM).
#pragma once

namespace heddle {

/// Installs the handlers of SIGINT and SIGTERM (and of SIGABRT: a failed internal assert exits
/// with code 2) and starts the watchdog thread. After the first signal, work that polls
/// cancel_requested() returns and the process exits normally; otherwise, `grace_s` seconds later,
/// the watchdog removes unfinished atomic output files (AtomicFile.h), logs `cancelled` and exits
/// with the signal's code. Call once, at start-up, before other threads exist.
void install_cancel_signals(double grace_s = 1.0);

}  // namespace heddle
