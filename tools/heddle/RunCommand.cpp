// `heddle run`: plan a model for a mesh, lower it to per-device programs, execute them on
// thread-devices, and (with --check) compare every output with the single-device interpreter.
// The run itself is the driver's (heddle/driver/RunRequest.h); this file wires it to the flags.
#include "RunCommand.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "Command.h"
#include "RunCheckpoint.h"
#include "RunReport.h"
#include "heddle/driver/RunMpi.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/frontend/Npy.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Limits.h"
#include "heddle/support/Log.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

model::ModelRequest model_request(const RunOptions& o) {
  model::ModelRequest r;
  r.source = o.model;
  r.overrides = o.overrides;
  r.options.with_loss = o.train;
  r.dims = o.dims;
  r.loss = o.loss;
  return r;
}

driver::RunRequest run_request(const RunOptions& o) {
  return {.model = model_request(o),
          .mesh = o.mesh,
          .strategy = o.strategy,
          .backend = o.backend,
          .train = o.train,
          .check = o.check,
          .steps = o.steps,
          .optimizer = driver::optimizer_options(o.optimizer, o.lr),
          .seed = o.seed,
          .rtol = o.rtol,
          .atol = o.atol,
          .emit_dir = o.emit_dir,
          .checkpoint_dir = o.checkpoint_dir,
          .checkpoint_every = o.checkpoint_every == -1 ? 1 : o.checkpoint_every,
          .resume_dir = o.resume_dir,
          .tactics = o.tactics};
}

void print_step(const RunOptions& o, int step, std::optional<float> loss, bool log_loss) {
  if (o.train && !o.json) fmt::print("step {:>4}  loss {:.6f}\n", step, *loss);
  if (o.train && log_loss)
    log(LogLevel::kInfo, "step", "step done", {{"step", step}, {"loss", *loss}});
  else
    log(LogLevel::kInfo, "step", "step done", {{"step", step}});
}

Result<std::vector<Tensor>> read_input_files(const Graph& g, const RunOptions& o) {
  std::vector<std::string> paths = o.input_files;
  if (!o.labels_file.empty()) paths.push_back(o.labels_file);  // the loss's input comes last
  auto files = heddle::read_input_files(g, paths, o.check);
  HEDDLE_TRY(files);
  for (const Diagnostic& d : files->warnings)
    report_note(LogLevel::kWarn, "warning", d.loc.to_string() + ": warning: " + d.message);
  return std::move(files->tensors);
}

Result<model::LoadedModel> load_runnable(const RunOptions& o) {
  return model::load_model_to_run(model_request(o));
}

Status check_run_options(const RunOptions& o) {
  if (o.steps != -1 && o.steps < 1) return Diagnostic("--steps must be >= 1");
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return Diagnostic("--optimizer must be adamw or sgd, got '" + o.optimizer + "'");
  if (!(o.rtol >= 0) || !(o.atol >= 0)) return Diagnostic("--rtol and --atol must be >= 0");
  if (o.train && !o.output_file.empty())
    return Diagnostic(
        "--output writes the single output of a forward run; a --train run's outputs are the loss "
        "and every updated parameter. Drop --output, or --train");
  // Device bounds before planning: a thread or a process per device.
  if (auto mesh = Mesh::parse(o.mesh); mesh.ok()) {
    const bool mpi = o.backend == "mpi";
    const int64_t cap = mpi ? limits::kMaxMpiRanks : limits::kMaxThreadDevices;
    if (mesh->num_devices() > cap)
      return Diagnostic(
          fmt::format("--mesh {} has {} devices, more than the {} the {} backend runs ({})", o.mesh,
                      mesh->num_devices(), cap, mpi ? "mpi" : "threads",
                      mpi ? "one process each" : "one thread and one arena each on this machine"));
  }
  // Output locations before any work: a long run must not end in "cannot write".
  if (!o.output_file.empty()) HEDDLE_TRY(check_writable_file(o.output_file, "--output"));
  if (!o.emit_dir.empty()) HEDDLE_TRY(check_writable_dir(o.emit_dir, "--emit"));
  return check_checkpoint_flags(o);
}

Result<int64_t> host_memory_limit(const RunOptions& o) {
  if (o.host_memory.empty()) return physical_memory_bytes();
  auto b = parse_bytes(o.host_memory, "--host-memory");
  HEDDLE_TRY(b);
  return static_cast<int64_t>(*b);
}

namespace {

// What the run holds on the host, against what the host has, before anything is allocated.
Status check_memory(const RunOptions& o, const Graph& g, const Session& session) {
  HostMemoryNeed need{.feeds = model_feed_bytes(g), .reference = o.check ? reference_bytes(g) : 0};
  for (int64_t p : session.peak_bytes_per_device()) need.devices += p;
  auto limit = host_memory_limit(o);
  HEDDLE_TRY(limit);
  return check_host_memory(need, *limit, !o.host_memory.empty());
}

int run(RunOptions o) {
  if (auto st = driver::choose_backend(o.backend); !st.ok()) return user_error(st.error());
  if (o.backend == "mpi") return run_mpi(o);
  if (auto st = check_run_options(o); !st.ok()) return user_error(st.error());
  auto loaded = load_runnable(o);
  if (!loaded.ok()) return user_error(loaded.error());
  if (report_verify(loaded->graph)) return 1;
  const driver::RunRequest request = run_request(o);
  auto prepared = driver::prepare_run(request, std::move(*loaded));
  if (!prepared.ok()) return user_error(prepared.error());
  const Graph& g = prepared->graph;
  driver::ThreadRunHooks hooks;
  hooks.before_feeds = [&](const Graph& run_g, const Session& session) -> Status {
    if (!o.output_file.empty() && run_g.outputs().size() != 1)
      return Diagnostic("--output takes one file, but the model has " +
                        std::to_string(run_g.outputs().size()) + " outputs");
    return check_memory(o, run_g, session);
  };
  if (!o.input_files.empty() || !o.labels_file.empty())  // else random inputs
    hooks.inputs = [&](const Graph& run_g) { return read_input_files(run_g, o); };
  hooks.on_step = [&](int s, std::optional<float> loss) { print_step(o, s, loss, false); };
  auto ran = driver::run_threads(request, *prepared, hooks);
  if (!ran.ok()) return user_error(ran.error());
  if (!o.output_file.empty())
    if (auto w = write_npy(o.output_file, ran->summary.result.outputs.at(g.outputs()[0])); !w.ok())
      return user_error(w.error());
  return report_run(o, ran->summary);
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  auto* app = root.add_subcommand(
      "run",
      "Partition a model over a mesh of devices (threads, or MPI ranks), execute it, and "
      "check it.");
  app->add_option("MODEL", opts->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file (.hd)")
      ->required();
  add_zoo_overrides(app, opts->overrides);
  add_dim_option(app, opts->dims);
  app->add_option("--input", opts->input_files,
                  "An .npy file per graph input, in order (default: random inputs)")
      ->take_all();
  app->add_option("--output", opts->output_file,
                  "Write the (single) output of the partitioned run to FILE.npy");
  app->add_option("--mesh", opts->mesh, "Devices: 4, 2x2 or named axes dp=2,tp=2 (default 1)");
  app->add_option("--strategy", opts->strategy,
                  "dp=N,tp=N,sp=on,zero=K (docs/cli.md); default: propagation over the mesh");
  app->add_option("--backend", opts->backend,
                  "threads or mpi (one process per device under mpirun; docs/mpi.md); default: "
                  "mpi when an MPI launcher started several ranks, else threads");
  app->add_option("--timeout", opts->timeout_s,
                  "MPI backend: seconds a collective may wait for its peers (default 60)");
  app->add_flag("--check", opts->check,
                "Compare every output with the single-device interpreter; exit 3 on mismatch");
  app->add_option("--emit", opts->emit_dir, "Write each device's lowered program to DIR");
  app->add_flag("--train", opts->train,
                "Run training steps (forward, loss, backward, optimizer) on a synthetic task");
  add_loss_option(app, opts->loss);
  app->add_option("--labels", opts->labels_file,
                  "With --loss: the labels .npy, fed after the --input files (default: random)");
  app->add_option("--steps", opts->steps,
                  "Steps to run, forward-only runs too (default 10 with --train, else 1)");
  app->add_option("--host-memory", opts->host_memory,
                  "Host memory the run may use, e.g. 24GiB (default: the physical memory)");
  app->add_option("--lr", opts->lr, "Learning rate (default 0.01)");
  app->add_option("--optimizer", opts->optimizer, "adamw (default) or sgd (with momentum)");
  app->add_option("--seed", opts->seed, "Seed of inputs and parameters (default 0)");
  app->add_option("--rtol", opts->rtol, "Relative tolerance of --check (default 1e-3)");
  app->add_option("--atol", opts->atol, "Absolute tolerance of --check (default 1e-4)");
  add_checkpoint_flags(app, *opts);
  add_tactic_option(app, opts->tactics);
  app->add_flag("--json", opts->json, "Print one JSON object");
  return {app, [opts] { return run(*opts); }};
}

}  // namespace heddle::cli
