// `heddle run`: plan a model for a mesh, lower it to per-device programs, execute them on
// thread-devices, and (with --check) compare every output with the single-device interpreter.
#include "RunCommand.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "Command.h"
#include "PipelineRun.h"
#include "Planning.h"
#include "RunReport.h"
#include "heddle/frontend/Npy.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/Session.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

Result<std::vector<ParamUpdate>> make_train_step(const RunOptions& o, Graph& g) {
  TrainStepOptions to;
  to.optimizer = o.optimizer == "sgd" ? TrainStepOptions::Optimizer::kSgdMomentum
                                      : TrainStepOptions::Optimizer::kAdamW;
  to.adamw.lr = o.lr;
  to.sgd.lr = o.lr;
  auto step = build_train_step(g, to);
  HEDDLE_TRY(step);
  g = std::move(step->graph);
  return std::move(step->updates);
}

// Integer inputs must index something: the smallest table or class count they feed.
int64_t integer_range(const Graph& g) {
  int64_t hi = 0;
  for (const Op& op : g.ops()) {
    int64_t n = 0;
    if (op.kind == OpKind::kEmbedding) n = g.type(op.inputs[1].value).shape()[0];
    if (op.kind == OpKind::kCrossEntropy) {
      const IVec& s = g.type(op.inputs[0].value).shape();
      n = s[s.size() - 1];
    }
    if (n > 0) hi = hi == 0 ? n : std::min(hi, n);
  }
  return hi == 0 ? 2 : hi;
}

std::string output_digest(const Graph& g, const TensorMap& outputs) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ULL;
  };
  for (ValueId v : g.outputs()) {
    const Tensor& t = outputs.at(v);
    if (t.is_int())
      mix(t.i64(), static_cast<size_t>(t.numel()) * sizeof(int64_t));
    else
      mix(t.f32(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  return fmt::format("{:016x}", h);
}

namespace {

// "NaN at [0, 5] (3 non-finite values)" for a float tensor with NaN or Inf; empty if all finite.
std::string non_finite_report(const Tensor& t) {
  if (t.is_int()) return "";
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.f32()[i]) && count++ == 0) first = i;
  if (count == 0) return "";
  std::vector<int64_t> at(t.rank());
  for (int64_t d = t.rank() - 1, rest = first; d >= 0; --d) {
    at[d] = rest % t.shape()[d];
    rest /= t.shape()[d];
  }
  float v = t.f32()[first];
  return fmt::format("{} at element [{}] ({} non-finite value{})",
                     std::isnan(v) ? "NaN"
                     : v > 0       ? "+Inf"
                                   : "-Inf",
                     fmt::join(at, ", "), count, count == 1 ? "" : "s");
}

}  // namespace

Result<std::vector<Tensor>> read_input_files(const Graph& g, const RunOptions& o) {
  if (o.input_files.empty()) return std::vector<Tensor>{};
  if (o.input_files.size() != g.inputs().size())
    return Diagnostic("--input given " + std::to_string(o.input_files.size()) +
                      " time(s), but the model has " + std::to_string(g.inputs().size()) +
                      " input(s); give one .npy file per input, in order");
  std::vector<Tensor> out;
  for (size_t i = 0; i < o.input_files.size(); ++i) {
    auto t = read_npy(o.input_files[i]);
    HEDDLE_TRY(t);
    const TensorType& want = g.type(g.inputs()[i]);
    if (t->shape() != want.shape() || t->is_int() != !dtype_is_float(want.dtype()))
      return Diagnostic(SourceLoc{o.input_files[i], 0, 0},
                        "holds " + std::string(dtype_name(t->dtype())) + t->shape().to_string() +
                            ", but input '" + g.value(g.inputs()[i]).name + "' is " +
                            want.to_string());
    if (auto bad = non_finite_report(*t); !bad.empty()) {
      Diagnostic d(SourceLoc{o.input_files[i], 0, 0},
                   "input '" + g.value(g.inputs()[i]).name + "' holds " + bad +
                       (o.check ? "; --check compares finite values only: fix the input"
                                : "; the outputs will not be finite"));
      if (o.check) return d;
      std::fprintf(stderr, "%s: warning: %s\n", d.loc.to_string().c_str(), d.message.c_str());
    }
    Tensor fixed(want);  // i32/bool files feed i64 inputs; storage is shared
    if (fixed.is_int())
      std::copy(t->i64(), t->i64() + t->numel(), fixed.i64());
    else
      std::copy(t->f32(), t->f32() + t->numel(), fixed.f32());
    out.push_back(std::move(fixed));
  }
  return out;
}

Result<model::LoadedModel> load_runnable(const RunOptions& o) {
  zoo::ModelOptions mo;
  mo.with_loss = o.train;
  auto loaded = model::load_model(
      {.source = o.model, .overrides = o.overrides, .options = mo, .dims = o.dims});
  HEDDLE_TRY(loaded);
  if (loaded->from_onnx && o.train)
    return Diagnostic(SourceLoc{o.model, 0, 0},
                      "--train applies to zoo and text-IR models; an imported ONNX model has no "
                      "loss");
  if (!loaded->missing_weights.empty())
    return Diagnostic(
        SourceLoc{o.model, 0, 0},
        "weights are missing for " + std::to_string(loaded->missing_weights.size()) +
            " parameter(s) (first: '" + loaded->missing_weights[0] +
            "'); the file has no weight data (stripped, or external data not found). show, plan "
            "and simulate work without weights; run needs them");
  return loaded;
}

Status check_run_options(const RunOptions& o) {
  if (o.steps != -1 && o.steps < 1) return Diagnostic("--steps must be >= 1");
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return Diagnostic("--optimizer must be adamw or sgd, got '" + o.optimizer + "'");
  return {};
}

int run_steps_of(const RunOptions& o) { return o.steps != -1 ? o.steps : o.train ? 10 : 1; }

int64_t model_feed_bytes(const Graph& g) {
  int64_t n = 0;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids)
      n += tensor_storage_bytes(g.type(v).dtype(), g.type(v).shape().product());
  return n;
}

int64_t reference_bytes(const Graph& g) {
  GraphStats size = graph_stats(g);
  return size.parameters * 4 + size.activation_bytes;
}

Result<int64_t> host_memory_limit(const RunOptions& o) {
  if (o.host_memory.empty()) return physical_memory_bytes();
  auto b = parse_bytes(o.host_memory, "--host-memory");
  HEDDLE_TRY(b);
  return static_cast<int64_t>(*b);
}

namespace {

// One tensor per graph input: from --input files (in graph-input order), else random.
Result<std::vector<Tensor>> read_inputs(const Graph& g, const RunOptions& o) {
  if (o.input_files.empty()) return random_inputs(g, o.seed + 1, integer_range(g));
  return read_input_files(g, o);
}

int run(const RunOptions& o) {
  if (o.backend == "mpi") return run_mpi(o);
  if (o.backend != "threads")
    return user_error(Diagnostic("--backend " + o.backend + ": use 'threads' or 'mpi'"));
  if (auto st = check_run_options(o); !st.ok()) return user_error(st.error());
  auto loaded = load_runnable(o);
  if (!loaded.ok()) return user_error(loaded.error());
  Graph* model = &loaded->graph;
  if (report_verify(*model)) return 1;
  Graph g = std::move(*model);
  auto spec = requested_strategy(o.mesh, o.strategy);  // the one parse of the strategy
  if (!spec.ok()) return user_error(spec.error());
  auto asked = pipeline_if_asked(o, g, *spec);
  if (!asked.ok()) return user_error(asked.error());
  std::optional<PipelinePlan> pipe = std::move(*asked);
  std::vector<ParamUpdate> updates;
  if (o.train) {
    auto step = make_train_step(o, g);
    if (!step.ok()) return user_error(step.error());
    updates = std::move(*step);
    // Gradients become outputs too, so --check compares them directly.
    if (o.check)
      for (const auto& u : updates) g.add_output(u.grad);
  }
  std::optional<PlannedRun> planned;
  std::vector<DeviceProgram> programs;
  if (!pipe) {
    auto pr = plan_run(g, o.mesh, *spec);
    if (!pr.ok()) return user_error(pr.error());
    planned = std::move(*pr);
    auto lowered = lower(g, planned->propagation.plan);
    if (!lowered.ok()) return user_error(lowered.error());
    programs = std::move(*lowered);
    if (!o.emit_dir.empty())
      if (auto s = write_programs(o.emit_dir, g, planned->mesh, programs); !s.ok())
        return user_error(s.error());
  }
  if (!o.output_file.empty() && g.outputs().size() != 1)
    return user_error(Diagnostic("--output takes one file, but the model has " +
                                 std::to_string(g.outputs().size()) + " outputs"));
  Session session = pipe ? Session(g, updates, std::move(pipe->program))
                         : Session(g, updates, std::move(programs));
  // What the run holds on the host, against what the host has, before anything is allocated.
  const std::vector<int64_t> peaks = session.peak_bytes_per_device();
  HostMemoryNeed need{.feeds = model_feed_bytes(g), .reference = o.check ? reference_bytes(g) : 0};
  for (int64_t p : peaks) need.devices += p;
  auto limit = host_memory_limit(o);
  if (!limit.ok()) return user_error(limit.error());
  if (auto st = check_host_memory(need, *limit, !o.host_memory.empty()); !st.ok())
    return user_error(st.error());
  // The synthetic task: one fixed random batch (inputs and labels), learned by memorisation.
  // ONNX models bring their own weights; --input files replace the random batch.
  TensorMap feeds;
  auto read = read_inputs(g, o);
  if (!read.ok()) return user_error(read.error());
  std::vector<Tensor> inputs = std::move(*read);
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
  for (ValueId p : g.params()) {
    auto w = loaded->weights.find(p);
    feeds.emplace(
        p, w != loaded->weights.end() ? w->second : init_param(g.value(p).name, g.type(p), o.seed));
  }
  std::optional<ReferenceCheck> reference;
  if (o.check) reference.emplace(make_reference(g, o, updates, feeds, inputs));
  StepLoopOptions loop;
  loop.steps = run_steps_of(o);
  loop.train = o.train;
  loop.reference = reference ? &*reference : nullptr;
  loop.on_step = [&](int s, const TensorMap& got) {
    if (o.train && !o.json)
      fmt::print("step {:>4}  loss {:.6f}\n", s, got.at(g.outputs()[0]).f32()[0]);
  };
  auto ran = session.run(std::move(feeds), loop);
  if (!ran.ok()) return user_error(ran.error());
  if (!o.output_file.empty())
    if (auto w = write_npy(o.output_file, ran->outputs.at(g.outputs()[0])); !w.ok())
      return user_error(w.error());
  RunSummary summary;
  summary.digest = output_digest(g, ran->outputs);
  summary.result = std::move(*ran);
  summary.peak_bytes_per_device = session.peak_bytes_per_device();  // the executor's plan
  summary.check = reference ? &reference->errors() : nullptr;
  if (pipe) {
    summary.note = pipe->note;
    summary.mesh = pipe->mesh;
    summary.strategy = pipe->spec.to_string();
    const PipelineProgram& P = *session.pipeline();
    summary.stats = P.stats();
    summary.stages = P.stages;
    summary.micro_batches = P.micro_batches;
    summary.schedule = P.schedule.to_string();
  } else {
    summary.note = planned->note;
    summary.mesh = planned->mesh;
    summary.strategy = planned->spec.to_string();
    summary.stats = program_stats(g, session.programs());
    summary.reshards = planned->propagation.reshards.size();
  }
  summary.devices_text = std::to_string(summary.mesh.num_devices()) + " threads";
  return report_run(o, g, summary);
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  auto* app = root.add_subcommand(
      "run",
      "Partition a model over a mesh of devices (threads, or MPI ranks), execute it, and "
      "check it.");
  app->add_option("MODEL", opts->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file")
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
                  "dp=N,tp=N,sp=on,zero=K (see CLI.md); default: propagation over the mesh");
  app->add_option("--backend", opts->backend,
                  "threads (default) or mpi (one process per device under mpirun; docs/mpi.md)");
  app->add_option("--timeout", opts->timeout_s,
                  "MPI backend: seconds a collective may wait for its peers (default 60)");
  app->add_flag("--check", opts->check,
                "Compare every output with the single-device interpreter; exit 1 on mismatch");
  app->add_option("--emit", opts->emit_dir, "Write each device's lowered program to DIR");
  app->add_flag("--train", opts->train,
                "Run training steps (forward, loss, backward, optimizer) on a synthetic task");
  app->add_option("--steps", opts->steps,
                  "Steps to run, forward-only runs too (default 10 with --train, else 1)");
  app->add_option("--host-memory", opts->host_memory,
                  "Host memory the run may use, e.g. 24GiB (default: the physical memory)");
  app->add_option("--lr", opts->lr, "Learning rate (default 0.01)");
  app->add_option("--optimizer", opts->optimizer, "adamw (default) or sgd (with momentum)");
  app->add_option("--seed", opts->seed, "Seed of inputs and parameters (default 0)");
  app->add_flag("--json", opts->json, "Print one JSON object");
  return {app, [opts] { return run(*opts); }};
}

}  // namespace heddle::cli
