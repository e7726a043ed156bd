// The rank step loops, feeds and fault injection behind MpiRun.h; the agreements are in
// MpiAgreement.cpp.
#include "heddle/runtime/MpiRun.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

#include "heddle/ops/Interpreter.h"
#include "heddle/ops/TileInit.h"
#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/PipelineFeeds.h"
#include "heddle/support/Assert.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/Log.h"

namespace heddle {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// Fails on purpose before the n-th collective (FaultPlan); forwards otherwise.
class FaultInjector : public Communicator {
 public:
  FaultInjector(Communicator& inner, const FaultPlan& plan) : inner_(inner), plan_(plan) {}
  int64_t rank() const override { return inner_.rank(); }
  int64_t size() const override { return inner_.size(); }
  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override {
    if (++count_ == plan_.at) {
      switch (plan_.mode) {
        case FaultPlan::Mode::kKill:
          std::raise(SIGKILL);
          break;
        case FaultPlan::Mode::kHang:
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        case FaultPlan::Mode::kStall:
          std::this_thread::sleep_for(std::chrono::duration<double>(plan_.stall_s));
          break;
        case FaultPlan::Mode::kThrow:
          throw std::runtime_error("injected failure before collective " +
                                   std::to_string(plan_.at) + " (HEDDLE_TEST_FAIL_RANK)");
        case FaultPlan::Mode::kSkip:
          break;  // below
        case FaultPlan::Mode::kDisagree:
          break;  // at the completion agreement (finish_rank), not here
      }
    }
    // Out of step: this and every later collective left out, so the rank goes on to the next
    // wait outside the groups (the agreement after the step) while its peers wait in the group.
    if (plan_.mode == FaultPlan::Mode::kSkip && count_ >= plan_.at) return {};
    return inner_.collective(c, group, mine, out, monoid);
  }

 private:
  Communicator& inner_;
  FaultPlan plan_;
  int64_t count_ = 0;
};

// The communicator the programs use: MPI, or the fault injector in front of it.
Communicator& maybe_injected(MpiCommunicator& mpi, const FaultPlan& plan,
                             std::optional<FaultInjector>& injector) {
  if (plan.rank != mpi.rank() || plan.mode == FaultPlan::Mode::kDisagree) return mpi;
  injector.emplace(mpi, plan);
  return *injector;
}

// Ends the job after a failure of the communicator itself (a peer gone, a timeout).
[[noreturn]] void fail_from_comm(MpiCommunicator& mpi, const Diagnostic& d) {
  fail_job(mpi, d, mpi.failure() ? mpi.failure_kind() : FailureKind::kUser);
}

template <class T>
T or_fail(MpiCommunicator& mpi, Result<T> r) {
  if (!r.ok()) fail_from_comm(mpi, r.error());
  return std::move(*r);
}

// After a step every rank learns the first rank whose step failed in step with the others (a
// kernel's diagnostic) or that was asked to stop (SIGINT/SIGTERM): the failure, or nothing. The
// agreement carries which of the two it was, so a stop one rank was asked for stops every rank
// as cancelled (exit 130), also a rank whose own signal comes a moment later than its peer's
// (srun and a process group signal the ranks one after another).
std::optional<MpiRunFailure> step_failure(MpiCommunicator& mpi, const Status& st) {
  if (mpi.failure()) fail_from_comm(mpi, *mpi.failure());
  const bool cancelled = cancel_requested();
  // 2 * rank for a failed step, 2 * rank + 1 for a stop asked for, 2 * size when all is well.
  const int64_t mine = !st.ok() ? 2 * mpi.rank() : cancelled ? 2 * mpi.rank() + 1 : 2 * mpi.size();
  const int64_t lowest = or_fail(mpi, mpi.min_over_ranks(mine));
  if (lowest == 2 * mpi.size()) return std::nullopt;
  const int64_t failed = lowest / 2;
  if (!st.ok() && failed == mpi.rank()) return MpiRunFailure{st.error(), FailureKind::kUser};
  if (st.ok() && (cancelled || lowest % 2 == 1))
    return MpiRunFailure{
        Diagnostic(cancelled ? std::string("stopped by a signal")
                             : "stopped by a signal to rank " + std::to_string(failed) + " (" +
                                   mpi.host_of(failed) + ")"),
        FailureKind::kCancelled};
  return MpiRunFailure{Diagnostic("rank " + std::to_string(failed) + " (" + mpi.host_of(failed) +
                                  ") failed; stopping"),
                       FailureKind::kPeerLost};
}

// The most of `bytes` over all ranks (collective).
int64_t largest_over_ranks(MpiCommunicator& mpi, int64_t bytes) {
  return or_fail(mpi, mpi.max_over_ranks(bytes));
}

// The completion agreement after `ran` (this rank's loop result): a failure when any rank failed
// or ran another number of steps.
std::optional<MpiRunFailure> completion_failure(MpiCommunicator& mpi, bool ok, int64_t steps) {
  CompletionVerdict v = or_fail(mpi, mpi.agree_on_completion(ok, steps));
  if (v.ok()) return std::nullopt;
  std::string text;
  if (!v.failed.empty()) {
    text = "rank(s)";
    for (int64_t r : v.failed) text += " " + std::to_string(r);
    text += " did not complete";
  }
  for (const auto& [r, s] : v.other_steps)
    text +=
        (text.empty() ? "" : "; ") + ("rank " + std::to_string(r) + " ran " + std::to_string(s) +
                                      " steps, this rank " + std::to_string(steps));
  // Ranks that failed are lost peers; ranks that ran another number of steps after the launch
  // agreement compared the steps are a bug (exit 2).
  return MpiRunFailure{Diagnostic("the ranks do not agree that the run completed: " + text),
                       !ok                ? FailureKind::kUser
                       : v.failed.empty() ? FailureKind::kInternal
                                          : FailureKind::kPeerLost};
}

// This rank's steps (rank 0 alone reports and checks them), then the completion agreement; on
// success `out` with the run and the per-device peaks `peaks()` gives. `failure` is what a step
// recorded when it failed the job (set while `step` runs).
MpiOutcome finish_rank(MpiCommunicator& mpi, const Graph& g, const StepFn& step,
                       const MpiRunOptions& o, const std::optional<MpiRunFailure>& failure,
                       MpiRankRun out, const std::function<std::vector<int64_t>()>& peaks) {
  StepLoopOptions loop = o.loop;
  if (mpi.rank() != 0) {
    loop.reference = nullptr;
    loop.on_step = nullptr;
  }
  auto ran = run_steps(g, step, loop);
  if (failure) return {std::nullopt, failure};
  if (ran.ok())  // the last step's outputs may view the loop's buffers, which end with it
    for (auto& [v, t] : ran->outputs)
      if (t.is_view()) t = Tensor(t);
  int64_t steps = ran.ok() ? static_cast<int64_t>(ran->step_times_s.size()) : 0;
  if (o.fault.mode == FaultPlan::Mode::kDisagree && o.fault.rank == mpi.rank()) ++steps;
  auto agreed = completion_failure(mpi, ran.ok(), steps);
  if (!ran.ok()) return {std::nullopt, MpiRunFailure{ran.error(), FailureKind::kUser}};
  if (agreed) return {std::nullopt, agreed};
  out.peak_bytes_per_device = peaks();
  out.result = std::move(*ran);
  return {std::move(out), std::nullopt};
}

}  // namespace

FaultPlan FaultPlan::from_environment() {
  FaultPlan p;
  p.rank = std::atoll(env_or("HEDDLE_TEST_FAIL_RANK", "-1").c_str());
  p.at = std::atoll(env_or("HEDDLE_TEST_FAIL_AT", "1").c_str());
  const std::string mode = env_or("HEDDLE_TEST_FAIL_MODE", "throw");
  if (mode == "kill") p.mode = Mode::kKill;
  if (mode == "hang") p.mode = Mode::kHang;
  if (mode == "disagree") p.mode = Mode::kDisagree;
  if (mode == "skip") p.mode = Mode::kSkip;
  if (mode.rfind("stall:", 0) == 0) {
    p.mode = Mode::kStall;
    p.stall_s = std::atof(mode.c_str() + 6);
  }
  return p;
}

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

Tensor HostData::param(const Graph& g, ValueId v, uint64_t seed) const {
  auto it = weights.find(v);
  return it != weights.end() ? it->second : init_param(g.value(v).name, g.type(v), seed);
}

std::vector<Tensor> HostData::model_inputs(const Graph& g, uint64_t seed, int64_t int_hi) const {
  return inputs.empty() ? random_inputs(g, seed + 1, int_hi) : inputs;
}

TensorMap shard_feeds(const Graph& g, const DeviceProgram& p, uint64_t seed, int64_t int_hi,
                      const HostData& host, const SequenceLayout& layout) {
  TensorMap feeds;
  for (const auto& [v, box] : load_hulls(p)) {
    const Value& val = g.value(v);
    if (auto dims = layout.dims.find(v); !layout.in_order() && dims != layout.dims.end()) {
      // Permuted whole (the sequence's edge tensors are small: tokens, labels, positions).
      const Box all = Box::of_shape(g.type(v).shape());
      auto at = std::find(g.inputs().begin(), g.inputs().end(), v) - g.inputs().begin();
      TensorMap whole;
      whole.emplace(v, val.role == ValueRole::kParam ? host.param(g, v, seed)
                       : host.inputs.empty()
                           ? random_input_tile(val.name, g.type(v), seed + 1, int_hi, all)
                           : host.inputs[static_cast<size_t>(at)]);
      permute_sequences(whole, layout);
      feeds.emplace(v, whole.at(v).crop(box));
      continue;
    }
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

void fail_job(MpiCommunicator& mpi, const Diagnostic& d, FailureKind kind) {
  const int code = to_int(exit_code_of(kind));
  log_failure(d, code);
  mpi.abort_job(d.message, code);
}

MpiOutcome run_spmd_rank(MpiCommunicator& mpi, const Graph& g,
                         const std::vector<ParamUpdate>& updates, const Mesh& mesh,
                         const DeviceProgram& own, HostData host, const MpiRunOptions& o) {
  const int64_t r = mpi.rank();
  HEDDLE_ASSERT(own.device == r) << "rank " << r << " holds the program of device " << own.device;
  if (auto st = mpi.prepare(mesh_partitions(mesh)); !st.ok()) fail_from_comm(mpi, st.error());
  std::optional<FaultInjector> injector;
  Communicator& comm = maybe_injected(mpi, o.fault, injector);
  TensorMap feeds = shard_feeds(g, own, o.seed, o.int_hi, host, o.layout);
  host = HostData{};  // the whole weights and files are no longer needed: keep only the tiles
  int64_t bytes = 0;
  for (const auto& [v, t] : feeds) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  MpiRankRun out;
  out.feed_bytes_max = largest_over_ranks(mpi, bytes);
  // Compiled once: the arena plan and kernels serve every step.
  // Collectives batched alike on every rank (they are matched in order), else one by one. Fault
  // injection counts collectives one by one: runs with it do not batch.
  const Graph laid_out = with_layout(g, o.layout);  // the program's positional attributes
  auto exec = std::make_unique<DeviceExecutor>(laid_out, own, false, o.fault.rank < 0);
  uint64_t sig = 1469598103934665603ull;  // FNV-1a of the batch sizes
  for (int64_t k : exec->collective_batches())
    sig = (sig ^ static_cast<uint64_t>(k)) * 1099511628211ull;
  const int64_t mine = static_cast<int64_t>(sig >> 1);
  const auto sigs = or_fail(mpi, mpi.exchange({mine}, "comparing collective batches"));
  if (std::any_of(sigs.begin(), sigs.end(), [&](int64_t x) { return x != mine; }))
    exec = std::make_unique<DeviceExecutor>(laid_out, own, false, false);
  std::map<ValueId, ValueId> fed_back;  // updated parameter or state -> the feed it replaces
  for (const auto& u : updates) {
    fed_back[u.updated] = u.param;
    for (const auto& state : u.state) fed_back[state.second] = state.first;
  }
  // Between training steps a rank needs only its own tiles of the updated parameters and state:
  // the trailing all-gathers that make one whole (tensor parallelism) run in the last step only
  // when the rank's feed tile lies inside its own tile (on every rank), and not at all with the
  // check (whose reference compares whole outputs every step).
  const auto& gathered = exec->gathered_outputs();
  std::vector<int64_t> owned;  // per gathered output: its value, and whether it may be skipped
  const bool may =
      o.loop.train && o.loop.reference == nullptr && o.layout.in_order() && o.fault.rank < 0;
  for (const auto& [v, t] : gathered) {
    auto back = fed_back.find(v);
    auto f = back == fed_back.end() ? feeds.end() : feeds.find(back->second);
    owned.push_back(v);
    owned.push_back(may && v != g.outputs()[0] && f != feeds.end() &&
                    f->second.dtype() == t->dtype() && t->region().contains(f->second.region()));
  }
  const auto n = static_cast<int64_t>(owned.size());
  std::vector<char> skip;
  if (or_fail(mpi, mpi.min_over_ranks(n)) == or_fail(mpi, mpi.max_over_ranks(n)) && n > 0) {
    const auto all = or_fail(mpi, mpi.exchange(owned, "comparing gathered outputs"));
    skip.assign(gathered.size(), 1);
    for (size_t k = 0; k < all.size(); k += 2) {
      const size_t i = (k % owned.size()) / 2;
      if (all[k] != owned[2 * i]) {  // another value at this place: skip nothing
        skip.clear();
        break;
      }
      skip[i] &= all[k + 1] == 1;
    }
  }
  exec->skip_gathers(skip);
  // Start together, so rank 0's wall time is the run's.
  or_fail(mpi, mpi.agree_on_failure(true));
  std::optional<MpiRunFailure> failure;
  TensorMap got;
  // An updated parameter or state whose tile is exactly the rank's feed tile (data parallelism)
  // is computed straight into a spare buffer of that feed (bind_outputs), which then swaps with
  // it: no copy. The spares are made after the first step and hold the replaced feeds between
  // steps.
  TensorMap spare;
  // StepLoopOptions::profile: this rank's entry, in the steps profiled_step() names.
  std::vector<InstrTimes> times(static_cast<size_t>(r + 1));
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    mpi.set_step(s);
    if (s == o.loop.steps) exec->skip_gathers({});  // the last step's outputs are whole
    if (!spare.empty()) exec->bind_outputs(spare);
    Status st;
    try {
      st = exec->run(comm, feeds,
                     {.optimizer_step = o.loop.train ? s : 0,
                      .overlap_ring = o.loop.overlap_ring,
                      .on_ring_event = o.loop.on_ring_event,
                      .instr_times = profiled_step(s, o.loop) ? &times : nullptr},
                     1);
    } catch (const std::exception& e) {
      fail_job(mpi, Diagnostic(e.what()), FailureKind::kInternal);
    }
    if ((failure = step_failure(mpi, st))) return failure->error;
    // Outputs are whole on every rank (lowering replicates them). Of an updated parameter or
    // optimizer state, only this rank's feed tile is copied (in place) for the next step, and
    // the step's output views the executor's tile (valid until the next run; finish_rank copies
    // the last step's); the rest are copied into `got`, in place (no allocation).
    TensorMap outs;
    for (const auto& [v, t] : exec->outputs()) {
      Tensor* into = nullptr;
      if (auto back = fed_back.find(v); o.loop.train && back != fed_back.end())
        if (auto it = feeds.find(back->second); it != feeds.end() && !it->second.is_view() &&
                                                it->second.dtype() == t->dtype() &&
                                                t->region().contains(it->second.region()))
          into = &it->second;
      const Tensor* shown = into;  // what the step's output views
      if (into && into->region() == t->region()) {
        auto sp = spare.find(v);
        if (sp != spare.end() &&
            (t->is_int() ? static_cast<const void*>(t->i64()) == sp->second.i64()
                         : t->f32() == sp->second.f32())) {
          std::swap(*into, sp->second);  // computed in the spare: it becomes the feed
        } else {
          into->copy_from(*t);
          if (sp != spare.end()) spare.erase(sp);  // its tile could not be bound: no spare
        }
        if (s == 1 && std::none_of(gathered.begin(), gathered.end(),
                                   [&](const auto& x) { return x.first == v; }))
          spare.emplace(v, Tensor(*into));  // not a gathered one's own tile
      } else if (into) {
        into->copy_from(*t);
        if (into->region() != t->region()) shown = t;
      } else {
        auto it = got.find(v);
        if (it != got.end() && !it->second.is_view() && it->second.dtype() == t->dtype() &&
            it->second.region() == t->region())
          it->second.copy_from(*t);
        else
          it = got.insert_or_assign(v, *t).first;
        shown = &it->second;
        if (auto back = fed_back.find(v); o.loop.train && back != fed_back.end())
          if (auto f = feeds.find(back->second); f != feeds.end())
            f->second = it->second.crop(f->second.region());  // a tile of a whole output
      }
      void* data = shown->is_int() ? static_cast<void*>(const_cast<int64_t*>(shown->i64()))
                                   : static_cast<void*>(const_cast<float*>(shown->f32()));
      outs.emplace(v, Tensor::view(shown->dtype(), shown->region(), data));
    }
    permute_sequences(outs, o.layout, true);  // the outputs in the sequence's order (copies)
    if (o.loop.train && o.loop.after_update) HEDDLE_TRY(o.loop.after_update(s, feeds));
    return std::optional<TensorMap>(std::move(outs));
  };
  MpiOutcome done = finish_rank(mpi, g, step, o, failure, std::move(out), [&] {
    return or_fail(mpi, mpi.exchange({exec->peak_bytes()}, "gathering per-rank peaks"));
  });
  if (done.run) done.run->instr_times = std::move(times[static_cast<size_t>(r)]);
  return done;
}

MpiOutcome run_pipeline_rank(MpiCommunicator& mpi, const Graph& g,
                             const std::vector<ParamUpdate>& updates, const PipelineProgram& P,
                             const Mesh& mesh, const std::map<ValueId, Tensor>& weights,
                             const MpiRunOptions& o) {
  const int64_t r = mpi.rank();
  if (auto st = mpi.prepare(mesh_partitions(mesh)); !st.ok()) fail_from_comm(mpi, st.error());
  std::optional<FaultInjector> injector;
  OffsetCommunicator stage_comm(maybe_injected(mpi, o.fault, injector),
                                r / P.stage_devices * P.stage_devices, P.stage_devices);
  // Only this rank's tiles of its stage's parameters and state and of the micro-batches its
  // stage reads.
  PipelineFeeds feeds = device_pipeline_feeds(P, g, r, o.seed, o.int_hi);
  std::map<std::string, ValueId> ids;  // this rank's parameters and state, by name
  for (auto& [name, t] : feeds.params) {
    const ValueId v = *g.find_value(name);
    ids.emplace(name, v);
    if (auto w = weights.find(v); w != weights.end()) t = w->second.crop(t.region());
  }
  int64_t bytes = 0;
  for (const auto& [n, t] : feeds.params) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  for (const auto& micro : feeds.inputs)
    for (const auto& [n, t] : micro) bytes += tensor_storage_bytes(t.dtype(), t.numel());
  MpiRankRun out;
  out.feed_bytes_max = largest_over_ranks(mpi, bytes);
  or_fail(mpi, mpi.agree_on_failure(true));
  std::optional<MpiRunFailure> failure;
  PipelineDeviceCache compiled;  // each block compiled on first use, kept for every step
  StepFn step = [&](int s) -> Result<std::optional<TensorMap>> {
    mpi.set_step(s);
    Result<PipelineResult> res = Diagnostic("not run");
    try {
      res = run_pipeline_device(
          P, r, stage_comm, mpi, feeds,
          {.optimizer_step = o.loop.train ? s : 0, .overlap_ring = o.loop.overlap_ring}, &compiled);
      if (auto st = mpi.flush_sends(); !st.ok()) fail_from_comm(mpi, st.error());
    } catch (const std::exception& e) {
      fail_job(mpi, Diagnostic(e.what()), FailureKind::kInternal);
    }
    if ((failure = step_failure(mpi, res.ok() ? Status{} : Status(res.error()))))
      return failure->error;
    for (auto& [name, t] : feeds.params)  // the next step starts from this rank's updated tiles
      if (auto it = res->updated.find(name); it != res->updated.end())
        t = it->second.crop(t.region());
    if (o.loop.train && o.loop.after_update) {  // collective: every rank writes its tiles
      TensorMap tiles;
      for (const auto& [name, t] : feeds.params) tiles.emplace(ids.at(name), t);
      HEDDLE_TRY(o.loop.after_update(s, tiles));
    }
    if (r != 0) return std::optional<TensorMap>();
    auto got = unpack_pipeline_result(P, g, updates, *res);
    HEDDLE_TRY(got);
    return std::optional<TensorMap>(std::move(*got));
  };
  return finish_rank(mpi, g, step, o, failure, std::move(out), [&] {
    return or_fail(mpi, mpi.exchange({compiled.arena_bytes()}, "gathering per-rank peaks"));
  });
}

}  // namespace heddle
