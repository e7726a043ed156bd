// The subcommands of the `heddle` CLI: each file registers one with CLI11 and returns how to run
// it. Runners return the process exit code: 0 ok, 1 user error, 2 internal error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "heddle/ir/Graph.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/support/Diagnostic.h"
#include "heddle/support/Result.h"

namespace heddle::cli {

/// A registered subcommand: the CLI11 node it parsed into and the function that runs it.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// Prints a user error to stderr in the `file:line:col: error: ...` form and returns exit code 1.
int user_error(const Diagnostic& d);

/// MODEL as a zoo name (with overrides and options), else as a text-IR file.
Result<Graph> resolve_model(const std::string& model, const zoo::ZooOverrides& overrides,
                            const zoo::ModelOptions& options);

/// Registers --layers --hidden --heads --seq --vocab --batch on `app`, filling `o`.
void add_zoo_overrides(CLI::App* app, zoo::ZooOverrides& o);

/// `heddle show`: summary, shape table, text/DOT/JSON export of a model.
Command add_show_command(CLI::App& root);

/// `heddle run`: partitioned execution on thread-devices (inference, or `--train` steps),
/// checked against the single-device interpreter with `--check`.
Command add_run_command(CLI::App& root);

/// `heddle schedule`: pipeline schedule search and baselines for a placement.
Command add_schedule_command(CLI::App& root);

/// `heddle simulate` and `heddle calibrate`: the cost model's commands.
Command add_simulate_command(CLI::App& root);
Command add_calibrate_command(CLI::App& root);

}  // namespace heddle::cli
