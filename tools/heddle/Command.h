// The subcommands of the `heddle` CLI: each file registers one with CLI11 and returns how to run
// it. Runners return the process exit code (support/ExitCode.h).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"
#include "heddle/ir/Graph.h"
#include "heddle/model/LoadModel.h"
#include "heddle/ops/Tensor.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/sharding/UserTactics.h"
#include "heddle/support/Diagnostic.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"
#include "heddle/support/Result.h"

namespace heddle::cli {

/// A registered subcommand: the CLI11 node it parsed into and the function that runs it.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// Prints a user error to stderr in the `file:line:col: error: ...` form (as a log record with
/// the rank's prefix under MPI, a JSON line with --json) and returns exit code 1.
int user_error(const Diagnostic& d);

/// user_error() for a failure of class `kind`; returns its exit code (support/ExitCode.h).
int report_failure(const Diagnostic& d, FailureKind kind);

/// Prints every verifier diagnostic of `g` (up to 20) to stderr; returns 1 when there were any.
int report_verify(const Graph& g);

/// Writes a warning or note that is not the result to stderr: `text` as it is, or with --json a
/// log record of `level` and `event` (so stderr stays JSON lines, docs/cli.md "Logging").
void report_note(LogLevel level, std::string_view event, const std::string& text);

/// Registers the repeatable `--dim NAME=VALUE` (ONNX dynamic dims) on `app`, filling `dims`.
void add_dim_option(CLI::App* app, std::map<std::string, int64_t>& dims);

/// Registers the repeatable `--tactic %w:1=tp` on `app`: each parsed by Tactic::parse() as the
/// flag is read (a malformed one is a usage error), appended to `tactics`.
void add_tactic_option(CLI::App* app, std::vector<Tactic>& tactics);

/// Registers --layers --hidden --heads --seq --vocab --batch --ffn --kv-heads --experts --top-k
/// on `app`, filling `o`.
void add_zoo_overrides(CLI::App* app, zoo::ZooOverrides& o);

/// `--loss cross_entropy|mse`: the loss --train appends to an ONNX model (default: auto).
void add_loss_option(CLI::App* app, std::string& loss);

/// `heddle show`: summary, shape table, text/DOT/JSON export of a model.
Command add_show_command(CLI::App& root);

/// `heddle run`: partitioned execution on thread-devices (inference, or `--train` steps),
/// checked against the single-device interpreter with `--check`.
Command add_run_command(CLI::App& root);

/// `heddle plan`: the fastest configuration that fits, found with the simulator.
Command add_plan_command(CLI::App& root);

/// `heddle schedule`: pipeline schedule search and baselines for a placement.
Command add_schedule_command(CLI::App& root);

/// `heddle simulate` and `heddle calibrate`: the cost model's commands.
Command add_simulate_command(CLI::App& root);
Command add_calibrate_command(CLI::App& root);

}  // namespace heddle::cli
