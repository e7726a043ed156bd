// Entry point of the `heddle` command: wires the subcommands together and maps failures onto the
// exit codes of the CLI contract (0 ok, 1 user error, 2 internal error).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <vector>

#include "Command.h"

namespace heddle::cli {

int user_error(const Diagnostic& d) {
  std::fprintf(stderr, "%s\n", d.to_string().c_str());
  return 1;
}

}  // namespace heddle::cli

namespace {

// Internal asserts abort; the contract says an internal error exits with code 2.
extern "C" void on_abort(int) { _exit(2); }

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGABRT, on_abort);
  CLI::App app{
      "heddle: one tensor program, many devices. Plans, simulates and runs partitioned "
      "tensor programs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "heddle 0.1.0");
  std::vector<heddle::cli::Command> commands = {
      heddle::cli::add_show_command(app),     heddle::cli::add_run_command(app),
      heddle::cli::add_plan_command(app),     heddle::cli::add_schedule_command(app),
      heddle::cli::add_simulate_command(app), heddle::cli::add_calibrate_command(app),
  };
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
    return 1;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 2;
  }
  return 1;
}
