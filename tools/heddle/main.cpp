// Entry point of the `heddle` command: wires the subcommands together, sets up the log
// (--log-level, --json records), turns SIGINT/SIGTERM into cancellation, and maps failures onto
// the exit codes of the CLI contract (support/ExitCode.h, docs/cli.md).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <thread>
#include <vector>

#include "Command.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace {

using heddle::CancelReason;
using heddle::ExitCode;
using heddle::to_int;

// How long work may take to stop after SIGINT/SIGTERM before the watchdog ends the process.
constexpr double kCancelGraceS = 1.0;

int g_wake[2] = {-1, -1};  // the signal handler wakes the watchdog through this pipe

// Internal asserts abort; the contract says an internal error exits with code 2.
extern "C" void on_abort(int) { _exit(to_int(ExitCode::kInternalError)); }

// First SIGINT/SIGTERM: ask all work to stop and wake the watchdog. A second: stop now.
extern "C" void on_signal(int sig) {
  const CancelReason reason = sig == SIGTERM ? CancelReason::kTerminate : CancelReason::kInterrupt;
  if (heddle::cancel_requested()) _exit(to_int(heddle::exit_code_of(reason)));
  heddle::request_cancel(reason);
  char c = 1;
  ssize_t ignored = write(g_wake[1], &c, 1);
  (void)ignored;
}

// Waits for a signal; then gives the work kCancelGraceS to stop by itself (searches and step
// loops poll the flag and return, so main exits normally) before removing unfinished output
// files and exiting with 130/143, so that code which does not poll (a solver call) cannot keep
// the process alive.
void watchdog() {
  char c;
  while (read(g_wake[0], &c, 1) != 1) {
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(kCancelGraceS));
  heddle::remove_pending_atomic_files();
  const int code = to_int(heddle::exit_code_of(heddle::cancel_reason()));
  heddle::log(heddle::LogLevel::kError, "cancelled",
              code == 143 ? "stopped by SIGTERM" : "interrupted (SIGINT)",
              {{"exit_code", static_cast<double>(code)}});
  _exit(code);
}

void install_signal_handlers() {
  std::signal(SIGABRT, on_abort);
  if (pipe(g_wake) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread(watchdog).detach();
}

// Floating-point options must be finite: CLI11 reads `nan` and `inf` as numbers, and a NaN
// timeout or limit compares false with everything (it disabled --timeout before).
heddle::Status check_finite_options(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name() != "FLOAT" || opt->count() == 0) continue;
    for (const std::string& v : opt->results()) {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (!std::isfinite(x))
        return heddle::Diagnostic(opt->get_name() + " " + v + ": give a finite number");
    }
  }
  for (const CLI::App* sub : app.get_subcommands())
    if (auto st = check_finite_options(*sub); !st.ok()) return st;
  return {};
}

// The log as the options and the launch ask: a rank under an MPI launcher names itself and its
// host in every record, and its records carry timestamps (cluster logs interleave many ranks).
heddle::Status configure_log(const std::string& level_text, bool timestamps, const CLI::App* cmd) {
  heddle::LogConfig c;
  if (!level_text.empty()) {
    auto level = heddle::parse_log_level(level_text);
    HEDDLE_TRY(level);
    c.level = *level;
  }
  const CLI::Option* json = cmd ? cmd->get_option_no_throw("--json") : nullptr;
  c.json = json != nullptr && json->count() > 0;
  // With --json, progress streams as JSON lines on stderr unless the user chose a level.
  if (c.json && level_text.empty()) c.level = heddle::LogLevel::kInfo;
  if (heddle::MpiEnvironment::launched_by_mpi()) {
    c.rank = heddle::MpiEnvironment::launcher_rank();
    c.host = heddle::MpiEnvironment::host_name();
    c.timestamps = true;
  }
  c.timestamps = c.timestamps || timestamps;
  heddle::configure_logging(c);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  install_signal_handlers();
  CLI::App app{
      "heddle: one tensor program, many devices. Plans, simulates and runs partitioned "
      "tensor programs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "heddle 0.1.0");
  std::string log_level;
  bool timestamps = false;
  app.add_option("--log-level", log_level,
                 "error, warn (default), info (progress per step) or debug; anywhere on the line");
  app.add_flag("--log-timestamps", timestamps,
               "Start every log line with a UTC time (on by default under mpirun)");
  std::vector<heddle::cli::Command> commands = {
      heddle::cli::add_show_command(app),     heddle::cli::add_run_command(app),
      heddle::cli::add_plan_command(app),     heddle::cli::add_schedule_command(app),
      heddle::cli::add_simulate_command(app), heddle::cli::add_calibrate_command(app),
  };
  for (auto& c : commands) c.app->fallthrough();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return to_int(ExitCode::kUserError);
  }
  const CLI::App* parsed = nullptr;
  for (auto& c : commands)
    if (c.app->parsed()) parsed = c.app;
  if (auto st = configure_log(log_level, timestamps, parsed); !st.ok())
    return heddle::cli::user_error(st.error());
  if (auto st = check_finite_options(app); !st.ok()) return heddle::cli::user_error(st.error());
  int code = to_int(ExitCode::kUserError);
  try {
    for (auto& c : commands)
      if (c.app->parsed()) code = c.run();
  } catch (const std::bad_alloc&) {
    heddle::cli::user_error(heddle::Diagnostic(
        "out of memory: the request needs more memory than this machine could give; use a "
        "smaller model, batch or mesh, or a machine with more memory"));
    return to_int(ExitCode::kUserError);
  } catch (const std::exception& e) {
    heddle::log_failure(heddle::Diagnostic(std::string("internal error: ") + e.what()),
                        to_int(ExitCode::kInternalError));
    return to_int(ExitCode::kInternalError);
  }
  // Work that noticed the cancellation returns early; its exit code is the signal's.
  if (heddle::cancel_requested()) {
    heddle::remove_pending_atomic_files();
    return to_int(heddle::exit_code_of(heddle::cancel_reason()));
  }
  return code;
}
