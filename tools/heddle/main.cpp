// Entry point of the `heddle` command: wires the subcommands together, sets up the log
// (--log-level, --json records), turns SIGINT/SIGTERM into cancellation (support/CancelSignals.h),
// and maps failures onto the exit codes of the CLI contract (support/ExitCode.h, docs/cli.md).
#include <cmath>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include "Command.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/CancelSignals.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace {

using heddle::ExitCode;
using heddle::to_int;

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
  heddle::install_cancel_signals();
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
