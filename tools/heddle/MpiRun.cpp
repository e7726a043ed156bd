// `heddle run --backend mpi`: every process (one per device, started by mpirun) makes the same
// plan and lowers its own device's program (rank 0 counts every device's for the summary and
// writes them for --emit, one at a time), materialises only its own tiles of parameters and
// inputs, runs its program over MPI, and rank 0 checks and reports. Bad input is found before
// MPI starts and reported by rank 0 only.
//
// Test-only fault injection (environment): HEDDLE_TEST_FAIL_RANK=R makes rank R fail just before
// its HEDDLE_TEST_FAIL_AT-th collective (default 1), as HEDDLE_TEST_FAIL_MODE says: `throw`
// (default: an exception, reported to the peers), `kill` (SIGKILL) or `hang` (sleeps forever).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "Command.h"
#include "PipelineRun.h"
#include "RunCommand.h"
#include "RunReport.h"
#include "heddle/frontend/Npy.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/TileInit.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/PipelineFeeds.h"
#include "heddle/runtime/Session.h"
#include "heddle/support/Assert.h"

namespace heddle::cli {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// Fails on purpose before the n-th collective (see the file comment); forwards otherwise.
class FaultInjector : public Communicator {
 public:
  FaultInjector(Communicator& inner, int64_t at, std::string mode)
      : inner_(inner), at_(at), mode_(std::move(mode)) {}
  int64_t rank() const override { return inner_.rank(); }
  int64_t size() const override { return inner_.size(); }
  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override {
    if (++count_ == at_) {
      if (mode_ == "kill") std::raise(SIGKILL);
      if (mode_ == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      throw std::runtime_error("injected failure before collective " + std::to_string(at_) +
                               " (HEDDLE_TEST_FAIL_RANK)");
    }
    return inner_.collective(c, group, mine, out, monoid);
  }

 private:
  Communicator& inner_;
  int64_t at_;
  std::string mode_;
  int64_t count_ = 0;
};

// What a run starts from beyond the seed: an ONNX model's weights and the --input files (whole,
// read by every rank; empty when not given).
struct HostData {
  std::map<ValueId, Tensor> weights;
  std::vector<Tensor> inputs;  ///< by graph-input position

  // Parameter `v` whole: its weights, else generated from `seed` as the threads backend does.
  Tensor param(const Graph& g, ValueId v, uint64_t seed) const {
    auto it = weights.find(v);
    return it != weights.end() ? it->second : init_param(g.value(v).name, g.type(v), seed);
  }
  // The whole model inputs: the files, else generated from seed + 1.
  std::vector<Tensor> model_inputs(const Graph& g, uint64_t seed, int64_t int_hi) const {
    return inputs.empty() ? random_inputs(g, seed + 1, int_hi) : inputs;
  }
};

// This device's tiles of the graph inputs and parameters its program loads: per value, the
// smallest box covering its loads, cut from the weights and input files where given, else
// generated element-identical to the whole-tensor helpers (parameters from `seed`, inputs from
// seed + 1, as the threads backend does).
TensorMap shard_feeds(const Graph& g, const DeviceProgram& p, uint64_t seed, int64_t int_hi,
                      const HostData& host) {
  TensorMap feeds;
  for (const auto& [v, box] : load_hulls(p)) {
    const Value& val = g.value(v);
    if (val.role == ValueRole::kParam) {
      auto w = host.weights.find(v);
      feeds.emplace(v, w != host.weights.end() ? w->second.crop(box)
                                               : init_param_tile(val.name, g.type(v), seed, box));
      continue;
    }
    auto at = std::find(g.inputs().begin(), g.inputs().end(), v) - g.inputs().begin();
    feeds.emplace(v, host.inputs.empty()
                         ? random_input_tile(val.name, g.type(v), seed + 1, int_hi, box)
                         : host.inputs[static_cast<size_t>(at)].crop(box));
  }
  return feeds;
}

// The mesh-axis groups collectives run over: for every non-empty set of mesh axes, the partition
// of the devices into groups that differ only along those axes (each in rank order).
std::vector<std::vector<std::vector<int64_t>>> mesh_partitions(const Mesh& mesh) {
  std::vector<std::vector<std::vector<int64_t>>> partitions;
  const int64_t k = mesh.rank();
  for (int64_t axes = 1; axes < (int64_t{1} << k); ++axes) {
    std::map<std::vector<int64_t>, std::vector<int64_t>> groups;  // fixed coordinates -> members
    for (int64_t d = 0; d < mesh.num_devices(); ++d) {
      IVec c = mesh.coords(d);
      std::vector<int64_t> fixed;
      for (int64_t a = 0; a < k; ++a)
        if (!(axes >> a & 1)) fixed.push_back(c[a]);
      groups[fixed].push_back(d);
    }
    std::vector<std::vector<int64_t>> partition;
    for (auto& [fixed, members] : groups)
      if (members.size() > 1) partition.push_back(std::move(members));
    if (!partition.empty()) partitions.push_back(std::move(partition));
  }
  return partitions;
}

// Rank 0's reference check (--check only; none on other ranks): the single-device step from the
// whole-model parameters and inputs.
std::optional<ReferenceCheck> rank0_reference(int64_t rank, const RunOptions& o, const Graph& g,
                                              const std::vector<ParamUpdate>& updates,
                                              int64_t int_hi, const HostData& host) {
  if (rank != 0 || !o.check) return std::nullopt;
  TensorMap params;
  for (ValueId p : g.params()) params.emplace(p, host.param(g, p, o.seed));
  return make_reference(g, o, updates, std::move(params), host.model_inputs(g, o.seed, int_hi));
}

// The loop options of rank `rank`: its reference, and rank 0 prints the losses.
StepLoopOptions loop_options(int64_t rank, const RunOptions& o, const Graph& g,
                             std::optional<ReferenceCheck>& reference) {
  StepLoopOptions loop;
  loop.steps = run_steps_of(o);
  loop.train = o.train;
  loop.reference = reference ? &*reference : nullptr;
  loop.on_step = [&o, &g, rank](int s, const TensorMap& got) {
    if (rank == 0 && o.train && !o.json)
      fmt::print("step {:>4}  loss {:.6f}\n", s, got.at(g.outputs()[0]).f32()[0]);
  };
  return loop;
}

// Ends the job after a failure that leaves this rank out of step with the others.
[[noreturn]] void die(MpiCommunicator& mpi, const std::string& message) {
  std::fprintf(stderr, "heddle: rank %lld: error: %s\n", static_cast<long long>(mpi.rank()),
               message.c_str());
  mpi.abort_job(message);
}

// After a step every rank learns the first rank whose step failed in step with the others (a
// kernel's diagnostic); true when one did (this rank said so).
bool step_failed(MpiCommunicator& mpi, const Status& st) {
  if (mpi.failure()) die(mpi, mpi.failure()->message);
  auto failed = mpi.agree_on_failure(st.ok());
  if (!failed.ok()) die(mpi, failed.error().message);
  if (*failed < 0) return false;
  const auto r = static_cast<long long>(mpi.rank());
  if (*failed == mpi.rank())
    std::fprintf(stderr, "heddle: rank %lld: %s\n", r, st.error().to_string().c_str());
  else
    std::fprintf(stderr, "heddle: rank %lld: error: rank %lld failed; stopping\n", r,
                 static_cast<long long>(*failed));
  return true;
}

// The communicator the programs use: MPI, or the fault injector in front of it.
Communicator& maybe_injected(MpiCommunicator& mpi, std::optional<FaultInjector>& injector) {
  if (env_or("HEDDLE_TEST_FAIL_RANK", "-1") != std::to_string(mpi.rank())) return mpi;
  injector.emplace(mpi, std::atoll(env_or("HEDDLE_TEST_FAIL_AT", "1").c_str()),
                   env_or("HEDDLE_TEST_FAIL_MODE", "throw"));
  return *injector;
}

// The most of `bytes` (of parameters and inputs generated) over all ranks (collective).
int64_t largest_feed_bytes(MpiCommunicator& mpi, int64_t bytes) {
  auto largest = mpi.max_over_ranks(bytes);
  if (!largest.ok()) die(mpi, largest.error().message);
  return *largest;
}

// Rank 0's summary of a run, except the plan (note, mesh, strategy, program statistics).
RunSummary rank0_summary(const MpiCommunicator& mpi, const Graph& g, RunResult result,
                         const std::optional<ReferenceCheck>& reference, int64_t feed_bytes_max) {
  RunSummary s;
  s.devices_text = fmt::format("{} MPI ranks", mpi.size());
  s.digest = output_digest(g, result.outputs);
  s.result = std::move(result);
  s.check = reference ? &reference->errors() : nullptr;
  s.feed_bytes = std::make_pair(feed_bytes_max, model_feed_bytes(g));
  return s;
}

int run_rank(const RunOptions& o, const Graph& g, const std::vector<ParamUpdate>& updates,
             const PlannedRun& planned, const ProgramTemplate& programs, const DeviceProgram& own,
             HostData host, MpiCommunicator& mpi) {
  const int64_t r = mpi.rank();
  if (auto st = mpi.prepare(mesh_partitions(planned.mesh)); !st.ok()) die(mpi, st.error().message);
  std::optional<FaultInjector> injector;
  Communicator& comm = maybe_injected(mpi, injector);
  const int64_t int_hi = integer_range(g);
  HEDDLE_ASSERT(own.device == r) << "rank " << r << " holds the program of device " << own.device;
  TensorMap feeds = shard_feeds(g, own, o.seed, int_hi, host);
  int64_t bytes = 0;
  for (const auto& [v, t] : feeds) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  const int64_t rank_feed_bytes_max = largest_feed_bytes(mpi, bytes);

  // Only rank 0 checks, and only it builds the whole model for that.
  std::optional<ReferenceCheck> reference = rank0_reference(r, o, g, updates, int_hi, host);
  host = HostData{};  // the whole weights and files are no longer needed: keep only the tiles
  // Start together, so rank 0's wall time is the run's.
  if (auto ready = mpi.agree_on_failure(true); !ready.ok()) die(mpi, ready.error().message);
  bool failed = false;
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    Result<TensorMap> got = Diagnostic("not run");
    try {
      got = run_device(g, own, comm, feeds, {.optimizer_step = o.train ? s : 0});
    } catch (const std::exception& e) {
      die(mpi, e.what());
    }
    if ((failed = step_failed(mpi, got.ok() ? Status{} : Status(got.error()))))
      return Diagnostic("a rank failed");
    // Outputs are whole on every rank (lowering replicates them): keep this rank's tiles of the
    // updated parameters and optimizer state for the next step.
    auto keep = [&](ValueId param, ValueId updated) {
      if (auto it = feeds.find(param); it != feeds.end())
        it->second = got->at(updated).crop(it->second.region());
    };
    if (o.train)
      for (const auto& u : updates) {
        keep(u.param, u.updated);
        for (const auto& st : u.state) keep(st.first, st.second);
      }
    return std::optional<TensorMap>(std::move(*got));
  };
  auto ran = run_steps(g, step, loop_options(r, o, g, reference));
  if (failed) return 1;
  if (!ran.ok()) return user_error(ran.error());
  if (r != 0) return 0;

  // Rank 0 holds every output whole (lowering replicates them).
  for (ValueId v : g.outputs()) {
    auto it = ran->outputs.find(v);
    if (it == ran->outputs.end() || it->second.region() != Box::of_shape(g.type(v).shape()))
      return user_error(Diagnostic("output " + g.value(v).name + " is not whole on rank 0"));
  }
  if (!o.output_file.empty())
    if (auto w = write_npy(o.output_file, ran->outputs.at(g.outputs()[0])); !w.ok())
      return user_error(w.error());
  RunSummary summary = rank0_summary(mpi, g, std::move(*ran), reference, rank_feed_bytes_max);
  summary.note = planned.note;
  summary.mesh = planned.mesh;
  summary.strategy = planned.spec.to_string();
  summary.stats = program_stats(g, programs);  // one device's program at a time
  summary.reshards = planned.propagation.reshards.size();
  return report_run(o, g, summary);
}

// A pipeline on MPI ranks: each rank runs its stage's blocks (collectives inside the stage over
// MPI, activations and gradients to other stages point to point) and keeps the parameters of its
// stage; rank 0 collects the results.
int run_pipeline_rank(const RunOptions& o, const Graph& g, const std::vector<ParamUpdate>& updates,
                      const PipelinePlan& pipe, MpiCommunicator& mpi) {
  const int64_t r = mpi.rank();
  const PipelineProgram& P = pipe.program;
  if (auto st = mpi.prepare(mesh_partitions(pipe.mesh)); !st.ok()) die(mpi, st.error().message);
  std::optional<FaultInjector> injector;
  OffsetCommunicator stage_comm(maybe_injected(mpi, injector),
                                r / P.stage_devices * P.stage_devices, P.stage_devices);
  const int64_t int_hi = integer_range(g);
  // Only this rank's tiles of its stage's parameters and state and of the micro-batches its
  // stage reads.
  PipelineFeeds feeds = device_pipeline_feeds(P, g, r, o.seed, int_hi);
  int64_t bytes = 0;
  for (const auto& [n, t] : feeds.params) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  for (const auto& micro : feeds.inputs)
    for (const auto& [n, t] : micro) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  const int64_t rank_feed_bytes_max = largest_feed_bytes(mpi, bytes);
  std::optional<ReferenceCheck> reference = rank0_reference(r, o, g, updates, int_hi, HostData{});
  if (auto ready = mpi.agree_on_failure(true); !ready.ok()) die(mpi, ready.error().message);
  bool failed = false;
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    Result<PipelineResult> res = Diagnostic("not run");
    try {
      res = run_pipeline_device(P, r, stage_comm, mpi, feeds, {.optimizer_step = o.train ? s : 0});
      if (auto st = mpi.flush_sends(); !st.ok()) die(mpi, st.error().message);
    } catch (const std::exception& e) {
      die(mpi, e.what());
    }
    if ((failed = step_failed(mpi, res.ok() ? Status{} : Status(res.error()))))
      return Diagnostic("a rank failed");
    for (auto& [name, t] : feeds.params)  // the next step starts from this rank's updated tiles
      if (auto it = res->updated.find(name); it != res->updated.end())
        t = it->second.crop(t.region());
    if (r != 0) return std::optional<TensorMap>();
    auto got = unpack_pipeline_result(P, g, updates, *res);
    HEDDLE_TRY(got);
    return std::optional<TensorMap>(std::move(*got));
  };
  auto ran = run_steps(g, step, loop_options(r, o, g, reference));
  if (failed) return 1;
  if (!ran.ok()) return user_error(ran.error());
  if (r != 0) return 0;
  RunSummary summary = rank0_summary(mpi, g, std::move(*ran), reference, rank_feed_bytes_max);
  summary.note = pipe.note;
  summary.mesh = pipe.mesh;
  summary.strategy = pipe.spec.to_string();
  summary.stats = P.stats();
  summary.stages = P.stages;
  summary.micro_batches = P.micro_batches;
  summary.schedule = P.schedule.to_string();
  return report_run(o, g, summary);
}

}  // namespace

int run_mpi(const RunOptions& o) {
  // Everything up to lowering is local and deterministic, so every rank finds the same mistake;
  // only rank 0 says so, and no rank has started MPI yet.
  const bool root = MpiEnvironment::launcher_rank() == 0;
  auto bad_input = [&](const Diagnostic& d) { return root ? user_error(d) : 1; };
  if (o.timeout_s <= 0)
    return bad_input(Diagnostic("--timeout must be a positive number of seconds"));
  if (auto st = check_run_options(o); !st.ok()) return bad_input(st.error());
  auto loaded = load_runnable(o);
  if (!loaded.ok()) return bad_input(loaded.error());
  if (root ? report_verify(loaded->graph) != 0 : !verify(loaded->graph).empty()) return 1;
  Graph g = std::move(loaded->graph);
  // Every rank reads the weights and --input files itself (one file system, or a copy on every
  // machine) and keeps its tiles of them.
  HostData host;
  host.weights = std::move(loaded->weights);
  auto files = read_input_files(g, o);
  if (!files.ok()) return bad_input(files.error());
  host.inputs = std::move(*files);
  if (!o.output_file.empty() && g.outputs().size() != 1)
    return bad_input(Diagnostic("--output takes one file, but the model has " +
                                std::to_string(g.outputs().size()) + " outputs"));
  auto spec = requested_strategy(o.mesh, o.strategy);  // the one parse of the strategy
  if (!spec.ok()) return bad_input(spec.error());
  auto asked = pipeline_if_asked(o, g, *spec);
  if (!asked.ok()) return bad_input(asked.error());
  std::optional<PipelinePlan> pipe = std::move(*asked);
  // A pipeline's ranks generate their tiles of every micro-batch and stage from --seed.
  if (pipe && (!host.weights.empty() || !host.inputs.empty() || !o.output_file.empty()))
    return bad_input(Diagnostic(
        "with pp > 1 the MPI backend generates weights and inputs from --seed; an ONNX model's "
        "weights, --input and --output need pp=1 there, or --backend threads"));
  std::vector<ParamUpdate> updates;
  if (o.train) {  // the same training step the threads backend builds
    auto step = make_train_step(o, g);
    if (!step.ok()) return bad_input(step.error());
    updates = std::move(*step);
    if (o.check)  // gradients become outputs, so --check compares them (as with threads)
      for (const auto& u : updates) g.add_output(u.grad);
  }
  std::optional<PlannedRun> planned;
  std::optional<ProgramTemplate> programs;
  DeviceProgram own;
  const int64_t launcher = MpiEnvironment::launcher_rank();
  if (!pipe) {
    auto pr = plan_run(g, o.mesh, *spec);
    if (!pr.ok()) return bad_input(pr.error());
    planned = std::move(*pr);
    // Every rank lowers the shared template and instantiates its own program; rank 0 also
    // counts every device's (the summary) and writes them (--emit), one at a time. A rank
    // beyond the mesh has no program and fails on the rank count below.
    auto lowered = lower_template(g, planned->propagation.plan);
    if (!lowered.ok()) return bad_input(lowered.error());
    programs = std::move(*lowered);
    if (launcher < planned->mesh.num_devices()) own = instantiate(g, *programs, launcher);
    if (root && !o.emit_dir.empty())
      if (auto s = write_programs(o.emit_dir, g, *programs); !s.ok()) return user_error(s.error());
  }
  const Mesh& mesh = pipe ? pipe->mesh : planned->mesh;

  MpiEnvironment env;
  if (env.size() != mesh.num_devices()) {
    if (env.rank() == 0)
      user_error(Diagnostic(fmt::format(
          "--mesh {} has {} devices but {} MPI ranks were started: start one rank per device "
          "(mpirun -np {} heddle run ...)",
          o.mesh, mesh.num_devices(), env.size(), mesh.num_devices())));
    return 1;
  }
  MpiCommunicator mpi({.timeout_s = o.timeout_s});
  return pipe ? run_pipeline_rank(o, g, updates, *pipe, mpi)
              : run_rank(o, g, updates, *planned, *programs, own, std::move(host), mpi);
}

}  // namespace heddle::cli
