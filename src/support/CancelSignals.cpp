#include "heddle/support/CancelSignals.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "heddle/support/AtomicFile.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace heddle {

namespace {

int g_wake[2] = {-1, -1};  // the signal handler wakes the watchdog through this pipe

// Internal asserts abort; the contract says an internal error exits with code 2.
extern "C" void on_abort(int) { _exit(to_int(ExitCode::kInternalError)); }

// First SIGINT/SIGTERM: ask all work to stop and wake the watchdog. A second: stop now.
extern "C" void on_signal(int sig) {
  const CancelReason reason = sig == SIGTERM ? CancelReason::kTerminate : CancelReason::kInterrupt;
  if (cancel_requested()) _exit(to_int(exit_code_of(reason)));
  request_cancel(reason);
  char c = 1;
  ssize_t ignored = write(g_wake[1], &c, 1);
  (void)ignored;
}

// Waits for a signal; then gives the work `grace_s` to stop by itself (searches and step loops
// poll the flag and return, so main exits normally) before removing unfinished output files and
// exiting with 130/143, so that code which does not poll (a solver call) cannot keep the process
// alive.
void watchdog(double grace_s) {
  char c;
  while (read(g_wake[0], &c, 1) != 1) {
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
  remove_pending_atomic_files();
  const int code = to_int(exit_code_of(cancel_reason()));
  log(LogLevel::kError, "cancelled", code == 143 ? "stopped by SIGTERM" : "interrupted (SIGINT)",
      {{"exit_code", static_cast<double>(code)}});
  _exit(code);
}

}  // namespace

void install_cancel_signals(double grace_s) {
  std::signal(SIGABRT, on_abort);
  if (pipe(g_wake) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread(watchdog, grace_s).detach();
}

}  // namespace heddle
