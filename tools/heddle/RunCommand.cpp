// `heddle run`: plan a model for a mesh, lower it to per-device programs, execute them on
// thread-devices, and (with --check) compare every output with the single-device interpreter.
// The run itself is the driver's (heddle/driver/RunRequest.h); this file wires it to the flags.
#include "RunCommand.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

#include "Command.h"
#include "heddle/driver/RunMpi.h"
#include "heddle/driver/RunSummaryJson.h"
#include "heddle/driver/RunSummaryText.h"
#include "heddle/frontend/Npy.h"
#include "heddle/runtime/RunInputs.h"
#include "heddle/support/Log.h"

namespace heddle::cli {

namespace {

// Whether step `step`'s record is logged: the first kEveryStep steps each, then at most one per
// kGapS seconds. Millisecond steps would otherwise stream hundreds of records a second into a
// launcher's pipe, and a full pipe blocks the rank (its SIGTERM record with it).
bool step_logged(int step) {
  constexpr int kEveryStep = 10;
  constexpr double kGapS = 0.2;
  using Clock = std::chrono::steady_clock;
  static Clock::time_point last;
  const Clock::time_point now = Clock::now();
  if (step > kEveryStep && std::chrono::duration<double>(now - last).count() < kGapS) return false;
  last = now;
  return true;
}

}  // namespace

void print_step(const RunOptions& o, int step, std::optional<float> loss, bool log_loss) {
  const bool train = o.args.train;
  if (train && !o.json) fmt::print("step {:>4}  loss {:.6f}\n", step, *loss);
  if (!step_logged(step)) return;
  if (train && log_loss)
    log(LogLevel::kInfo, "step", "step done", {{"step", step}, {"loss", *loss}});
  else
    log(LogLevel::kInfo, "step", "step done", {{"step", step}});
}

Result<std::vector<Tensor>> read_input_files(const Graph& g, const RunOptions& o) {
  auto files = heddle::read_input_files(g, driver::input_paths(o.args), o.args.check);
  HEDDLE_TRY(files);
  for (const Diagnostic& d : files->warnings)
    report_note(LogLevel::kWarn, "warning", d.loc.to_string() + ": warning: " + d.message);
  return std::move(files->tensors);
}

int report_run(const RunOptions& o, const driver::RunSummary& s) {
  if (auto warning = driver::diverged_loss(s)) report_note(LogLevel::kWarn, "loss", *warning);
  if (o.json)
    fmt::print("{}\n", driver::summary_json(s, o.args.backend, o.args.train).dump(2));
  else
    fmt::print("{}", driver::summary_text(s, o.args));
  if (auto mismatch = driver::check_mismatch(s))
    return report_failure(*mismatch, FailureKind::kCheckMismatch);
  return 0;
}

namespace {

int run(RunOptions o) {
  driver::RunArguments& a = o.args;
  if (auto st = driver::choose_backend(a.backend); !st.ok()) return user_error(st.error());
  if (a.backend == "mpi") return run_mpi(o);
  if (auto st = driver::check_run_arguments(a); !st.ok()) return user_error(st.error());
  auto loaded = driver::load_runnable(a);
  if (!loaded.ok()) return user_error(loaded.error());
  if (report_verify(loaded->graph)) return 1;
  const driver::RunRequest request = driver::run_request(a);
  auto prepared = driver::prepare_run(request, std::move(*loaded));
  if (!prepared.ok()) return user_error(prepared.error());
  driver::ThreadRunHooks hooks;
  hooks.before_feeds = [&](const Graph& g, const Session& session) {
    return driver::check_run_fits(a, g, session);
  };
  if (!a.input_files.empty() || !a.labels_file.empty())  // else random inputs
    hooks.inputs = [&](const Graph& g) { return read_input_files(g, o); };
  hooks.on_step = [&](int s, std::optional<float> loss) { print_step(o, s, loss, false); };
  auto ran = driver::run_threads(request, *prepared, hooks);
  if (!ran.ok()) return user_error(ran.error());
  const Graph& g = prepared->graph;
  if (!a.output_file.empty())
    if (auto w = write_npy(a.output_file, ran->summary.result.outputs.at(g.outputs()[0])); !w.ok())
      return user_error(w.error());
  return report_run(o, ran->summary);
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  driver::RunArguments* a = &opts->args;
  auto* app = root.add_subcommand(
      "run",
      "Partition a model over a mesh of devices (threads, or MPI ranks), execute it, and "
      "check it.");
  app->add_option("MODEL", a->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  add_zoo_overrides(app, a->overrides);
  add_dim_option(app, a->dims);
  app->add_option("--input", a->input_files,
                  "An .npy file per graph input, in order (default: random inputs)")
      ->take_all();
  app->add_option("--output", a->output_file,
                  "Write the (single) output of the partitioned run to FILE.npy");
  app->add_option("--mesh", a->mesh, "Devices: 4, 2x2 or named axes dp=2,tp=2 (default 1)");
  app->add_option("--strategy", a->strategy,
                  "dp=N,tp=N,sp=on,zero=K (docs/cli.md); default: propagation over the mesh");
  app->add_option("--backend", a->backend,
                  "threads or mpi (one process per device under mpirun; docs/mpi.md); default: "
                  "mpi when an MPI launcher started several ranks, else threads");
  app->add_option("--timeout", a->timeout_s,
                  "MPI backend: seconds a collective may wait for its peers (default 60)");
  app->add_flag("--check", a->check,
                "Compare every output with the single-device interpreter; exit 3 on mismatch");
  app->add_option("--emit", a->emit_dir, "Write each device's lowered program to DIR");
  app->add_flag("--train", a->train,
                "Run training steps (forward, loss, backward, optimizer) on a synthetic task");
  app->add_flag("--no-ring-overlap", a->no_ring_overlap,
                "Ring attention (cp): run each key/value exchange after the block kernel before "
                "it instead of overlapping them (same results; for measuring the overlap)");
  app->add_flag("--profile", a->profile,
                "Time every instruction of device 0's program in the steps after the first and "
                "print the step by kernel, slowest first (JSON: profile)");
  add_loss_option(app, a->loss);
  app->add_option("--labels", a->labels_file,
                  "With --loss: the labels .npy, fed after the --input files (default: random)");
  app->add_option("--steps", a->steps,
                  "Steps to run, forward-only runs too (default 10 with --train, else 1)");
  app->add_option("--host-memory", a->host_memory,
                  "Host memory the run may use, e.g. 24GiB (default: the physical memory)");
  app->add_option("--lr", a->lr, "Learning rate (default 0.01)");
  app->add_option("--optimizer", a->optimizer, "adamw (default) or sgd (with momentum)");
  app->add_option("--seed", a->seed, "Seed of inputs and parameters (default 0)");
  app->add_option("--rtol", a->rtol, "Relative tolerance of --check (default 1e-3)");
  app->add_option("--atol", a->atol, "Absolute tolerance of --check (default 1e-4)");
  app->add_option("--checkpoint", a->checkpoint_dir,
                  "With --train: write parameters, optimizer state and the step to DIR (atomic, "
                  "checksummed; docs/reliability.md)");
  app->add_option("--checkpoint-every", a->checkpoint_every,
                  "Write a checkpoint after every N-th step (default 1: every step)");
  app->add_option("--resume", a->resume_dir,
                  "With --train: continue from the latest checkpoint in DIR up to --steps (on any "
                  "mesh or strategy)");
  add_tactic_option(app, a->tactics);
  app->add_flag("--json", opts->json, "Print one JSON object");
  return {app, [opts] { return run(*opts); }};
}

}  // namespace heddle::cli
