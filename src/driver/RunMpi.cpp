// run_mpi(): the rank's preparation, the agreements, the plan (rank 0's for `auto`), the
// checkpoint resumed from the shards this rank needs, the rank loop and rank 0's summary.
#include "heddle/driver/RunMpi.h"

#include <fmt/format.h>

#include <cstdlib>

#include "heddle/driver/RunCheckpoints.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/runtime/BlasThreads.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/InstrProfile.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/runtime/ProgramFiles.h"
#include "heddle/runtime/RunInputs.h"
#include "heddle/search/RunPlan.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace heddle::driver {

namespace {

// Everything a rank prepared: the run, the whole inputs and weights it starts from, and (SPMD)
// the plan and the programs' template.
struct RankRun {
  PreparedRun run;
  HostData host;
  std::optional<search::PlannedRun> planned;
  std::optional<ProgramTemplate> programs;
  SequenceLayout layout;  // the order the programs hold the sequence in
};

int report(const MpiRunHooks& hooks, const Diagnostic& d, FailureKind kind) {
  if (hooks.report) return hooks.report(d, kind);
  const int code = to_int(exit_code_of(kind));
  log_failure(d, code);
  return code;
}

uint64_t tensor_digest(const Tensor& t, uint64_t h) {
  const size_t n = static_cast<size_t>(t.numel()) * (t.is_int() ? sizeof(int64_t) : sizeof(float));
  const char* p =
      t.is_int() ? reinterpret_cast<const char*>(t.i64()) : reinterpret_cast<const char*>(t.f32());
  return fnv1a(std::string_view(p, n), h);
}

// What the ranks compare before any work.
std::vector<LaunchPart> launch_parts(const RunRequest& r, const MpiRunHooks& hooks,
                                     const RankRun& p) {
  std::vector<LaunchPart> parts;
  const std::string& args = hooks.arguments;
  parts.push_back({"the arguments", fnv1a(args), args.size() <= 600 ? "'" + args + "'" : ""});
  auto model_bytes = read_file_bounded(
      r.model.source, {.max_bytes = int64_t{1} << 32, .what = "model file", .raise_with = ""});
  parts.push_back({"the model file", model_bytes.ok() ? fnv1a(*model_bytes) : 0, ""});
  uint64_t w = fnv1a("weights");
  for (const auto& [v, t] : p.host.weights) w = tensor_digest(t, w);
  parts.push_back({"the model's weights", w, ""});
  uint64_t in = fnv1a("inputs");
  for (const Tensor& t : p.host.inputs) in = tensor_digest(t, in);
  parts.push_back({"the --input files", in, ""});
  parts.push_back({"the model as built", fnv1a(print_graph(p.run.graph)), ""});
  auto exe = read_file_bounded(
      "/proc/self/exe", {.max_bytes = int64_t{1} << 31, .what = "heddle binary", .raise_with = ""});
  parts.push_back({"the heddle binary (another build or version)", exe.ok() ? fnv1a(*exe) : 0, ""});
  return parts;
}

// The preparation every rank does before talking to the others: verify, prepare, read the
// inputs. Deterministic.
Result<RankRun> prepare_rank(const RunRequest& r, Result<model::LoadedModel> loaded,
                             const MpiRunHooks& hooks) {
  HEDDLE_TRY(loaded);
  if (auto diags = verify(loaded->graph); !diags.empty()) return diags[0];
  auto prepared = prepare_run(r, std::move(*loaded));
  HEDDLE_TRY(prepared);
  RankRun p;
  p.run = std::move(*prepared);
  p.host.weights = std::move(p.run.weights);
  const Graph& g = p.run.graph;
  if (hooks.inputs) {
    auto files = hooks.inputs(g);
    HEDDLE_TRY(files);
    p.host.inputs = std::move(*files);
  }
  if (hooks.output && g.outputs().size() != 1)
    return Diagnostic("--output takes one file, but the model has " +
                      std::to_string(g.outputs().size()) + " outputs");
  // A pipeline's ranks generate their tiles of every micro-batch and stage from --seed.
  if (p.run.pipe && (!p.host.weights.empty() || !p.host.inputs.empty() || hooks.output))
    return Diagnostic(
        "with pp > 1 the MPI backend generates weights and inputs from --seed; an ONNX model's "
        "weights, --input and --output need pp=1 there, or --backend threads");
  return p;
}

// True when every rank's `ok` is; otherwise the ranks that failed said why themselves, and this
// rank says which failed (when it did not).
bool all_ranks_ok(MpiCommunicator& mpi, const MpiRunHooks& hooks, bool ok, const char* stage) {
  auto all = mpi.exchange({ok ? 1 : 0}, stage);
  if (!all.ok()) fail_job(mpi, all.error(), mpi.failure_kind());
  std::vector<int64_t> failed;
  for (int64_t q = 0; q < mpi.size(); ++q)
    if ((*all)[static_cast<size_t>(q)] == 0) failed.push_back(q);
  if (failed.empty()) return true;
  if (ok) {
    std::string list;
    for (int64_t q : failed) list += (list.empty() ? "" : ", ") + std::to_string(q);
    report(
        hooks,
        Diagnostic(fmt::format("rank(s) {} failed {} (see their messages); stopping", list, stage)),
        FailureKind::kPeerLost);
  }
  return false;
}

// The SPMD plan: `--strategy auto` is planned by rank 0 alone (the intra-op ILP priced for its
// CPU profile) and shared, so every rank runs one plan; other strategies every rank plans itself.
Result<search::PlannedRun> plan_on_ranks(MpiCommunicator& mpi, const RunRequest& r,
                                         const PreparedRun& p) {
  if (!p.spec.auto_search) return search::plan_run(p.graph, r.mesh, p.spec, r.tactics);
  std::optional<Result<search::PlannedRun>> mine;
  std::vector<int64_t> code{-1};
  if (mpi.rank() == 0) {
    mine.emplace(search::plan_run(p.graph, r.mesh, p.spec, r.tactics));
    if (mine->ok()) {  // the ops' strategies; every rank derives the tactics' starts itself
      ShardingPlan ops = (*mine)->propagation.plan;
      ops.pinned.clear();
      code = encode_plan(ops);
    }
  }
  auto shared = share_from_root(mpi, code);
  if (!shared.ok()) fail_job(mpi, shared.error(), mpi.failure_kind());
  if (mpi.rank() == 0) return std::move(*mine);
  if (shared->size() == 1 && (*shared)[0] == -1)
    return Diagnostic("rank 0 could not plan --strategy auto (see its message)");
  auto mesh = Mesh::parse(r.mesh);
  HEDDLE_TRY(mesh);
  auto plan = decode_plan(*shared, *mesh);
  HEDDLE_TRY(plan);
  auto pins = search::run_tactic_pins(p.graph, *mesh, r.tactics);  // where tactics start values
  HEDDLE_TRY(pins);
  plan->pinned = PinnedChoices(p.graph, *mesh, *pins).starts();
  search::PlannedRun out;
  out.mesh = *mesh;
  out.spec = p.spec;
  out.propagation.plan = std::move(*plan);
  out.note = "auto: rank 0's intra-op plan over mesh " + out.mesh.to_string();
  return out;
}

// The SPMD plan and its programs' template on every rank.
Status plan_and_lower(MpiCommunicator& mpi, const RunRequest& r, RankRun& p) {
  auto planned = plan_on_ranks(mpi, r, p.run);
  HEDDLE_TRY(planned);
  p.planned = std::move(*planned);
  auto layout = sequence_layout(r, p.run.graph, p.planned->spec);
  HEDDLE_TRY(layout);
  p.layout = std::move(*layout);
  auto lowered = lower_template(with_layout(p.run.graph, p.layout), p.planned->propagation.plan);
  HEDDLE_TRY(lowered);
  p.programs = std::move(*lowered);
  return {};
}

// The plan's fields of the summary (before the run: what checkpoints record).
RunSummary planned_summary(const RankRun& p, int64_t ranks) {
  RunSummary s;
  s.devices_text = fmt::format("{} MPI ranks", ranks);
  if (p.run.pipe) {
    const PipelineProgram& P = p.run.pipe->program;
    s.note = p.run.pipe->note;
    s.mesh = p.run.pipe->mesh;
    s.strategy = p.run.pipe->spec.to_string();
    s.stats = P.stats();
    s.stages = P.stages;
    s.micro_batches = P.micro_batches;
    s.schedule = P.schedule.to_string();
  } else {
    s.note = p.planned->note;
    s.mesh = p.planned->mesh;
    s.strategy = p.planned->spec.to_string();
    s.reshards = p.planned->propagation.reshards.size();
    s.split = p.planned->report;
    describe_split(p.run.graph, s);
  }
  return s;
}

// The tiles of the saved tensors rank `rank` feeds (its program's or its stage's loads): what it
// reads of a checkpoint. Nothing (read whole) on rank 0 with the check, whose reference starts
// from the whole tensors.
std::optional<std::map<ValueId, Box>> tiles_needed(const RunRequest& r, const RankRun& p,
                                                   const DeviceProgram* own, int64_t rank) {
  if (r.check && rank == 0) return std::nullopt;
  if (own) {
    auto need = load_hulls(*own);
    for (auto& [v, box] : need)  // the rank permutes these whole (SequenceLayout.h)
      if (p.layout.dims.count(v)) box = Box::of_shape(p.run.graph.type(v).shape());
    return need;
  }
  std::map<ValueId, Box> need;
  for (const auto& [name, box] : p.run.pipe->program.device_loads(rank))
    if (auto v = p.run.graph.find_value(name)) need.emplace(*v, box);
  return need;
}

// Rank 0's summary of a completed run; a diagnostic when an output is not whole here.
Result<RunSummary> rank0_summary(const RankRun& p, RunSummary s, MpiRankRun run) {
  const Graph& g = p.run.graph;
  // Rank 0 holds every output whole (lowering replicates them).
  for (ValueId v : g.outputs()) {
    auto it = run.result.outputs.find(v);
    if (it == run.result.outputs.end() || it->second.region() != Box::of_shape(g.type(v).shape()))
      return Diagnostic("output " + g.value(v).name + " is not whole on rank 0");
  }
  s.digest = output_digest(g, run.result.outputs);
  s.model_name = g.name();
  s.model_ops = g.num_ops();
  s.result = std::move(run.result);
  s.feed_bytes = std::make_pair(run.feed_bytes_max, model_feed_bytes(g));
  s.peak_bytes_per_device = std::move(run.peak_bytes_per_device);
  if (!p.run.pipe) s.stats = program_stats(g, *p.programs);  // one device's program at a time
  return s;
}

}  // namespace

Status choose_backend(std::string& backend) {
  const int64_t ranks = MpiEnvironment::launcher_size();
  if (backend.empty()) {
    backend = ranks > 1 ? "mpi" : "threads";
    if (ranks > 1)
      log(LogLevel::kInfo, "backend",
          "started by an MPI launcher with " + std::to_string(ranks) +
              " ranks: running as --backend mpi");
    return {};
  }
  if (backend != "threads" && backend != "mpi")
    return Diagnostic("--backend " + backend + ": use 'threads' or 'mpi'");
  if (backend == "threads" && ranks > 1)
    return Diagnostic("--backend threads was given, but an MPI launcher started " +
                      std::to_string(ranks) +
                      " ranks: each would run the whole job and write the same files. Use "
                      "--backend mpi (one rank per device), or start one process");
  return {};
}

MpiRun run_mpi(const RunRequest& r, Result<model::LoadedModel> loaded, const MpiRunHooks& hooks) {
  // One BLAS thread per rank unless the user chose: ranks already fill the cores.
  const bool blas_set = std::getenv("OPENBLAS_NUM_THREADS") || std::getenv("OMP_NUM_THREADS");
  BlasThreads one_blas_thread(blas_set ? 0 : 1);
  log(LogLevel::kInfo, "blas",
      blas_set ? "BLAS threads as OPENBLAS_NUM_THREADS or OMP_NUM_THREADS say"
               : "one BLAS thread per rank (set OPENBLAS_NUM_THREADS for more)",
      {{"threads", blas_threads()}});
  MpiRun out;
  auto fail = [&](const Diagnostic& d) {
    out.exit_code = report(hooks, d, FailureKind::kUser);
    return std::move(out);
  };
  auto stopped = [&] {  // the ranks that failed reported it
    out.exit_code = 1;
    return std::move(out);
  };
  auto local = prepare_rank(r, std::move(loaded), hooks);  // before any message
  if (!local.ok()) report(hooks, local.error(), FailureKind::kUser);
  MpiEnvironment env;
  MpiCommunicator mpi({.timeout_s = hooks.timeout_s > 0 ? hooks.timeout_s : 60});
  if (!all_ranks_ok(mpi, hooks, local.ok(), "to load their inputs")) return stopped();
  RankRun& p = *local;
  const Graph& g = p.run.graph;
  if (auto st = agree_on_launch(mpi, launch_parts(r, hooks, p)); !st.ok()) return fail(st.error());

  const int64_t rank = mpi.rank();
  Status planned = p.run.pipe ? Status{} : plan_and_lower(mpi, r, p);
  if (!planned.ok()) report(hooks, planned.error(), FailureKind::kUser);
  if (!all_ranks_ok(mpi, hooks, planned.ok(), "to plan")) return stopped();
  RunSummary summary = planned_summary(p, mpi.size());
  const std::string plan_text =
      p.run.pipe ? p.run.pipe->spec.to_string() + " " + p.run.pipe->program.schedule.to_string()
                 : print_graph(g) + p.planned->propagation.plan.to_string(g);
  if (auto st = agree_on_launch(mpi, {{"the plan", fnv1a(plan_text), ""}}); !st.ok())
    return fail(st.error());
  if (env.size() != summary.mesh.num_devices())
    return fail(Diagnostic(fmt::format(
        "--mesh {} has {} devices but {} MPI ranks were started: start one rank per device "
        "(mpirun -np {} heddle run ...)",
        r.mesh, summary.mesh.num_devices(), env.size(), summary.mesh.num_devices())));
  if (rank == 0 && !r.emit_dir.empty() && p.programs)
    if (auto s = write_programs(r.emit_dir, g, *p.programs); !s.ok()) return fail(s.error());

  // The checkpoint: each rank reads the shards holding its tiles; each writes its own.
  std::optional<DeviceProgram> own;
  if (p.programs) own = instantiate(g, *p.programs, rank);
  auto checkpoints = plan_checkpoints(r, g, p.run.updates, summary,
                                      {.rank = rank,
                                       .ranks = mpi.size(),
                                       .all_gather =
                                           [&mpi](const std::vector<int64_t>& v) {
                                             return mpi.exchange(v, "writing a checkpoint");
                                           },
                                       .need = tiles_needed(r, p, own ? &*own : nullptr, rank)});
  if (!checkpoints.ok()) report(hooks, checkpoints.error(), FailureKind::kUser);
  if (!all_ranks_ok(mpi, hooks, checkpoints.ok(), "to read the checkpoint")) return stopped();
  // Every rank must resume from the same checkpoint (its manifest lists every file's checksum).
  const std::optional<LoadedCheckpoint>& resumed = checkpoints->resume;
  const std::string from = resumed ? resumed->manifest_fnv1a : "";
  const std::string where = resumed ? "'" + resumed->path + "'" : "none";
  if (auto st = agree_on_launch(mpi, {{"the checkpoint resumed", fnv1a(from), where}}); !st.ok())
    return fail(st.error());
  if (resumed)
    for (auto& [v, t] : checkpoints->resume->tensors)
      p.host.weights.insert_or_assign(v, std::move(t));

  const int64_t int_hi = integer_range(g);
  std::optional<ReferenceCheck> reference;
  if (rank == 0 && r.check) {  // only rank 0 checks, and only it builds the whole model for that
    TensorMap params;
    for (ValueId v : g.params()) params.emplace(v, p.host.param(g, v, r.seed));
    reference.emplace(
        make_reference(r, p.run, std::move(params), p.host.model_inputs(g, r.seed, int_hi)));
  }
  MpiRunOptions ro;
  ro.loop.steps = steps_of(r);
  ro.loop.train = r.train;
  ro.loop.overlap_ring = r.overlap_ring;
  ro.loop.profile = r.profile;
  ro.loop.first_step = resumed ? resumed->step + 1 : 1;
  ro.loop.after_update = std::move(checkpoints->after_update);
  ro.loop.reference = reference ? &*reference : nullptr;
  ro.loop.on_step = step_callback(g, r.train, hooks.on_step);
  ro.seed = r.seed;
  ro.int_hi = int_hi;
  ro.fault = FaultPlan::from_environment();
  ro.layout = p.layout;
  MpiOutcome ran =
      p.run.pipe ? run_pipeline_rank(mpi, g, p.run.updates, p.run.pipe->program, summary.mesh,
                                     p.host.weights, ro)
                 : run_spmd_rank(mpi, g, p.run.updates, summary.mesh, *own, std::move(p.host), ro);
  if (ran.failure) {
    out.exit_code = report(hooks, ran.failure->error, ran.failure->kind);
    return out;
  }
  if (rank != 0) return out;
  if (r.train) summary.params_digest = params_digest(p.run.updates, ran.run->result.outputs);
  const InstrTimes times = std::move(ran.run->instr_times);  // rank 0's, with --profile
  auto s = rank0_summary(p, std::move(summary), std::move(*ran.run));
  if (!s.ok()) return fail(s.error());
  out.summary = std::move(*s);
  if (own && times.runs > 0) out.summary->profile = profile_rows(g, *own, times);
  if (reference) {
    out.check = std::make_unique<CheckErrors>(reference->errors());
    out.summary->check = out.check.get();
  }
  if (hooks.output) out.output = out.summary->result.outputs.at(g.outputs()[0]);
  return out;
}

}  // namespace heddle::driver
