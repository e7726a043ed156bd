// `heddle run --backend mpi`: every process (one per device, started by mpirun or srun) loads
// and checks its inputs, the ranks agree that they were started alike (arguments, model, input
// files, binary; then the plan, which rank 0 makes for `--strategy auto`), and each runs its
// device's program (heddle/runtime/MpiRun.h). Rank 0 writes --output and reports, after every
// rank agreed that the run completed. Every rank reports its own errors, prefixed with its rank
// and host (support/Log.h).
#include "heddle/runtime/MpiRun.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "Command.h"
#include "PipelineRun.h"
#include "RunCheckpoint.h"
#include "RunCommand.h"
#include "RunReport.h"
#include "heddle/frontend/Npy.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/runtime/BlasThreads.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/Log.h"

namespace heddle::cli {

namespace {

// Everything a rank prepared before running: the graph (a training step with --train), the plan
// and this rank's program.
struct Prepared {
  Graph g;
  HostData host;
  std::vector<ParamUpdate> updates;
  StrategySpec spec;
  std::optional<PipelinePlan> pipe;
  std::optional<PlannedRun> planned;
  std::optional<ProgramTemplate> programs;
};

// The arguments that change what a run computes, in one canonical line (not paths: a model or
// input file may sit at another path on another host; their bytes are compared instead).
std::string arguments_text(const RunOptions& o, bool model_is_file) {
  std::string s = fmt::format(
      "model={} mesh={} strategy={} train={} steps={} lr={} optimizer={} seed={} check={} rtol={} "
      "atol={} inputs={} output={} emit={}",
      model_is_file ? "<file>" : o.model, o.mesh, o.strategy, o.train, run_steps_of(o), o.lr,
      o.optimizer, o.seed, o.check, o.rtol, o.atol, o.input_files.size(), !o.output_file.empty(),
      !o.emit_dir.empty());
  s += fmt::format(" layers={} hidden={} heads={} seq={} vocab={} batch={}",
                   o.overrides.layers.value_or(-1), o.overrides.hidden.value_or(-1),
                   o.overrides.heads.value_or(-1), o.overrides.seq.value_or(-1),
                   o.overrides.vocab.value_or(-1), o.overrides.batch.value_or(-1));
  for (const auto& [k, v] : o.dims) s += fmt::format(" dim.{}={}", k, v);
  return s;
}

uint64_t tensor_digest(const Tensor& t, uint64_t h) {
  const size_t n = static_cast<size_t>(t.numel()) * (t.is_int() ? sizeof(int64_t) : sizeof(float));
  const char* p =
      t.is_int() ? reinterpret_cast<const char*>(t.i64()) : reinterpret_cast<const char*>(t.f32());
  return fnv1a(std::string_view(p, n), h);
}

// What the ranks compare before any work.
std::vector<LaunchPart> launch_parts(const RunOptions& o, const Prepared& p) {
  std::vector<LaunchPart> parts;
  auto model_bytes = read_file_bounded(
      o.model, {.max_bytes = int64_t{1} << 32, .what = "model file", .raise_with = ""});
  const bool is_file = model_bytes.ok();
  const std::string args = arguments_text(o, is_file);
  parts.push_back({"the arguments", fnv1a(args), args.size() <= 600 ? "'" + args + "'" : ""});
  parts.push_back({"the model file", is_file ? fnv1a(*model_bytes) : 0, ""});
  uint64_t w = fnv1a("weights");
  for (const auto& [v, t] : p.host.weights) w = tensor_digest(t, w);
  parts.push_back({"the model's weights", w, ""});
  uint64_t in = fnv1a("inputs");
  for (const Tensor& t : p.host.inputs) in = tensor_digest(t, in);
  parts.push_back({"the --input files", in, ""});
  uint64_t graph = fnv1a(print_graph(p.g));
  parts.push_back({"the model as built", graph, ""});
  auto exe = read_file_bounded(
      "/proc/self/exe", {.max_bytes = int64_t{1} << 31, .what = "heddle binary", .raise_with = ""});
  parts.push_back({"the heddle binary (another build or version)", exe.ok() ? fnv1a(*exe) : 0, ""});
  return parts;
}

// The local preparation every rank does before talking to the others: load, verify, read the
// files, parse the strategy, plan a pipeline, build the training step. Deterministic.
Result<Prepared> prepare_locally(const RunOptions& o) {
  HEDDLE_TRY(check_run_options(o));
  if (!(o.timeout_s > 0)) return Diagnostic("--timeout must be a positive number of seconds");
  auto loaded = load_runnable(o);
  HEDDLE_TRY(loaded);
  if (auto diags = verify(loaded->graph); !diags.empty()) return diags[0];
  Prepared p;
  p.g = std::move(loaded->graph);
  p.host.weights = std::move(loaded->weights);
  auto files = read_input_files(p.g, o);
  HEDDLE_TRY(files);
  p.host.inputs = std::move(*files);
  if (!o.output_file.empty() && p.g.outputs().size() != 1)
    return Diagnostic("--output takes one file, but the model has " +
                      std::to_string(p.g.outputs().size()) + " outputs");
  auto spec = requested_strategy(o.mesh, o.strategy);  // the one parse of the strategy
  HEDDLE_TRY(spec);
  p.spec = *spec;
  auto asked = pipeline_if_asked(o, p.g, p.spec);
  HEDDLE_TRY(asked);
  p.pipe = std::move(*asked);
  // A pipeline's ranks generate their tiles of every micro-batch and stage from --seed.
  if (p.pipe && (!p.host.weights.empty() || !p.host.inputs.empty() || !o.output_file.empty()))
    return Diagnostic(
        "with pp > 1 the MPI backend generates weights and inputs from --seed; an ONNX model's "
        "weights, --input and --output need pp=1 there, or --backend threads");
  if (o.train) {  // the same training step the threads backend builds
    auto step = make_train_step(o, p.g);
    HEDDLE_TRY(step);
    p.updates = std::move(*step);
    if (o.check)  // gradients become outputs, so --check compares them (as with threads)
      for (const auto& u : p.updates) p.g.add_output(u.grad);
  }
  return p;
}

// True when every rank's `ok` is; otherwise the ranks that failed said why themselves, and this
// rank says which failed (when it did not).
bool all_ranks_ok(MpiCommunicator& mpi, bool ok, const char* stage) {
  auto all = mpi.exchange({ok ? 1 : 0}, stage);
  if (!all.ok()) fail_job(mpi, all.error(), mpi.failure_kind());
  std::vector<int64_t> failed;
  for (int64_t q = 0; q < mpi.size(); ++q)
    if ((*all)[static_cast<size_t>(q)] == 0) failed.push_back(q);
  if (failed.empty()) return true;
  if (ok) {
    std::string list;
    for (int64_t q : failed) list += (list.empty() ? "" : ", ") + std::to_string(q);
    report_failure(
        Diagnostic(fmt::format("rank(s) {} failed {} (see their messages); stopping", list, stage)),
        FailureKind::kPeerLost);
  }
  return false;
}

// The SPMD plan: `--strategy auto` is planned by rank 0 alone (the intra-op ILP priced for its
// CPU profile) and shared, so every rank runs one plan; other strategies every rank plans itself.
Result<PlannedRun> plan_on_ranks(MpiCommunicator& mpi, const RunOptions& o, const Prepared& p) {
  if (!p.spec.auto_search) return plan_run(p.g, o.mesh, p.spec, o.tactics);
  std::optional<Result<PlannedRun>> mine;
  std::vector<int64_t> code{-1};
  if (mpi.rank() == 0) {
    mine.emplace(plan_run(p.g, o.mesh, p.spec, o.tactics));
    if (mine->ok() && (*mine)->propagation.plan.pinned.empty())
      code = encode_plan((*mine)->propagation.plan);
  }
  auto shared = share_from_root(mpi, code);
  if (!shared.ok()) fail_job(mpi, shared.error(), mpi.failure_kind());
  if (mpi.rank() == 0) return std::move(*mine);
  if (shared->size() == 1 && (*shared)[0] == -1)
    return Diagnostic("rank 0 could not plan --strategy auto (see its message)");
  auto mesh = Mesh::parse(o.mesh);
  HEDDLE_TRY(mesh);
  auto plan = decode_plan(*shared, *mesh);
  HEDDLE_TRY(plan);
  PlannedRun r;
  r.mesh = *mesh;
  r.spec = p.spec;
  r.propagation.plan = std::move(*plan);
  r.note = "auto: rank 0's intra-op plan over mesh " + r.mesh.to_string();
  return r;
}

// Rank 0's report of a finished run.
int report_rank0(const RunOptions& o, const Prepared& p, MpiCommunicator& mpi, MpiRankRun run,
                 const std::optional<ReferenceCheck>& reference) {
  const Graph& g = p.g;
  // Rank 0 holds every output whole (lowering replicates them).
  for (ValueId v : g.outputs()) {
    auto it = run.result.outputs.find(v);
    if (it == run.result.outputs.end() || it->second.region() != Box::of_shape(g.type(v).shape()))
      return user_error(Diagnostic("output " + g.value(v).name + " is not whole on rank 0"));
  }
  if (!o.output_file.empty())
    if (auto w = write_npy(o.output_file, run.result.outputs.at(g.outputs()[0])); !w.ok())
      return user_error(w.error());
  RunSummary s;
  s.devices_text = fmt::format("{} MPI ranks", mpi.size());
  s.digest = output_digest(g, run.result.outputs);
  if (o.train) s.params_digest = params_digest(p.updates, run.result.outputs);
  s.result = std::move(run.result);
  s.check = reference ? &reference->errors() : nullptr;
  s.feed_bytes = std::make_pair(run.feed_bytes_max, model_feed_bytes(g));
  s.peak_bytes_per_device = std::move(run.peak_bytes_per_device);
  if (p.pipe) {
    const PipelineProgram& P = p.pipe->program;
    s.note = p.pipe->note;
    s.mesh = p.pipe->mesh;
    s.strategy = p.pipe->spec.to_string();
    s.stats = P.stats();
    s.stages = P.stages;
    s.micro_batches = P.micro_batches;
    s.schedule = P.schedule.to_string();
  } else {
    s.note = p.planned->note;
    s.mesh = p.planned->mesh;
    s.strategy = p.planned->spec.to_string();
    s.stats = program_stats(g, *p.programs);  // one device's program at a time
    s.reshards = p.planned->propagation.reshards.size();
    s.split = p.planned->report;
  }
  return report_run(o, g, s);
}

}  // namespace

int run_mpi(const RunOptions& o) {
  // One BLAS thread per rank unless the user chose: ranks already fill the cores.
  const bool blas_set = std::getenv("OPENBLAS_NUM_THREADS") || std::getenv("OMP_NUM_THREADS");
  BlasThreads one_blas_thread(blas_set ? 0 : 1);
  log(LogLevel::kInfo, "blas",
      blas_set ? "BLAS threads as OPENBLAS_NUM_THREADS or OMP_NUM_THREADS say"
               : "one BLAS thread per rank (set OPENBLAS_NUM_THREADS for more)",
      {{"threads", blas_threads()}});
  auto local = prepare_locally(o);  // every rank, before any message; each reports its own
  if (!local.ok()) user_error(local.error());
  MpiEnvironment env;
  MpiCommunicator mpi({.timeout_s = o.timeout_s > 0 ? o.timeout_s : 60});
  if (!all_ranks_ok(mpi, local.ok(), "to load their inputs")) return 1;
  Prepared& p = *local;
  if (auto st = agree_on_launch(mpi, launch_parts(o, p)); !st.ok()) return user_error(st.error());

  const int64_t r = mpi.rank();
  Status planned_ok;
  if (!p.pipe) {
    auto pr = plan_on_ranks(mpi, o, p);
    if (pr.ok()) {
      p.planned = std::move(*pr);
      auto lowered = lower_template(p.g, p.planned->propagation.plan);
      if (lowered.ok())
        p.programs = std::move(*lowered);
      else
        planned_ok = lowered.error();
    } else {
      planned_ok = pr.error();
    }
  }
  if (!planned_ok.ok()) user_error(planned_ok.error());
  if (!all_ranks_ok(mpi, planned_ok.ok(), "to plan")) return 1;
  const Mesh& mesh = p.pipe ? p.pipe->mesh : p.planned->mesh;
  const std::string plan_text =
      p.pipe ? p.pipe->spec.to_string() + " " + p.pipe->program.schedule.to_string()
             : print_graph(p.g) + p.planned->propagation.plan.to_string(p.g);
  if (auto st = agree_on_launch(mpi, {{"the plan", fnv1a(plan_text), ""}}); !st.ok())
    return user_error(st.error());
  if (env.size() != mesh.num_devices())
    return user_error(Diagnostic(fmt::format(
        "--mesh {} has {} devices but {} MPI ranks were started: start one rank per device "
        "(mpirun -np {} heddle run ...)",
        o.mesh, mesh.num_devices(), env.size(), mesh.num_devices())));
  if (r == 0 && !o.emit_dir.empty() && p.programs)
    if (auto s = write_programs(o.emit_dir, p.g, *p.programs); !s.ok())
      return user_error(s.error());

  // --resume: every rank reads the checkpoint whole and cuts its own tiles, as from weights.
  const CheckpointRun ck_run =
      p.pipe ? checkpoint_run(o, p.g, mesh, p.pipe->spec.to_string(), p.pipe->note)
             : checkpoint_run(o, p.g, mesh, p.planned->spec.to_string(), p.planned->note);
  Result<std::optional<LoadedCheckpoint>> resumed = std::optional<LoadedCheckpoint>();
  if (p.pipe && (!o.checkpoint_dir.empty() || !o.resume_dir.empty()))
    resumed = Diagnostic(
        "--checkpoint and --resume run with pp=1 on the MPI backend (pipelines: --backend "
        "threads)");
  else
    resumed = resume_if_asked(o, p.g, p.updates, ck_run);
  if (!resumed.ok()) user_error(resumed.error());
  if (!all_ranks_ok(mpi, resumed.ok(), "to read the checkpoint")) return 1;
  // Every rank must resume from the same checkpoint (its manifest lists every file's checksum).
  const std::string from = *resumed ? (*resumed)->manifest_fnv1a : "";
  const std::string where = *resumed ? "'" + (*resumed)->path + "'" : "none";
  if (auto st = agree_on_launch(mpi, {{"the checkpoint resumed", fnv1a(from), where}}); !st.ok())
    return user_error(st.error());
  if (*resumed)
    for (auto& [v, t] : (*resumed)->tensors) p.host.weights.insert_or_assign(v, std::move(t));

  const int64_t int_hi = integer_range(p.g);
  // Only rank 0 checks, and only it builds the whole model for that.
  std::optional<ReferenceCheck> reference;
  if (r == 0 && o.check) {
    TensorMap params;
    for (ValueId v : p.g.params()) params.emplace(v, p.host.param(p.g, v, o.seed));
    reference.emplace(make_reference(p.g, o, p.updates, std::move(params),
                                     p.host.model_inputs(p.g, o.seed, int_hi)));
  }
  MpiRunOptions ro;
  ro.loop.steps = run_steps_of(o);
  ro.loop.train = o.train;
  ro.loop.first_step = *resumed ? (*resumed)->step + 1 : 1;
  if (!o.checkpoint_dir.empty())  // each rank writes its shards; rank 0 the manifest
    ro.loop.after_update = checkpoint_hook(
        p.g, p.updates,
        checkpoint_options(o, ck_run, r, mpi.size(), [&mpi](const std::vector<int64_t>& v) {
          return mpi.exchange(v, "writing a checkpoint");
        }));
  ro.loop.reference = reference ? &*reference : nullptr;
  ro.loop.on_step = [&](int s, const TensorMap& got) {
    if (o.train && !o.json)
      fmt::print("step {:>4}  loss {:.6f}\n", s, got.at(p.g.outputs()[0]).f32()[0]);
    if (o.train)
      log(LogLevel::kInfo, "step", "step done",
          {{"step", s}, {"loss", got.at(p.g.outputs()[0]).f32()[0]}});
    else
      log(LogLevel::kInfo, "step", "step done", {{"step", s}});
  };
  ro.seed = o.seed;
  ro.int_hi = int_hi;
  ro.fault = FaultPlan::from_environment();
  MpiOutcome out = p.pipe ? run_pipeline_rank(mpi, p.g, p.updates, p.pipe->program, mesh, ro)
                          : run_spmd_rank(mpi, p.g, p.updates, mesh,
                                          instantiate(p.g, *p.programs, r), std::move(p.host), ro);
  if (out.failure) return report_failure(out.failure->error, out.failure->kind);
  if (r != 0) return 0;
  return report_rank0(o, p, mpi, std::move(*out.run), reference);
}

}  // namespace heddle::cli
