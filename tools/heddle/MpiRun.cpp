// `heddle run --backend mpi`: every process (one per device, started by mpirun) makes the same
// plan and lowers its own device's program (rank 0 every device's, for the summary and --emit),
// materialises only its own tiles of parameters and inputs, runs its program over MPI, and rank 0
// checks and reports. Bad input is found before MPI starts and
// reported by rank 0 only.
//
// Test-only fault injection (environment): HEDDLE_TEST_FAIL_RANK=R makes rank R fail just before
// its HEDDLE_TEST_FAIL_AT-th collective (default 1), as HEDDLE_TEST_FAIL_MODE says: `throw`
// (default: an exception, reported to the peers), `kill` (SIGKILL) or `hang` (sleeps forever).
#include <fmt/format.h>

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
#include "RunCommand.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/TileInit.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/MpiEnvironment.h"
#include "heddle/support/Assert.h"

namespace heddle::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

// This device's tiles of the graph inputs and parameters its program loads: per value, the
// smallest box covering its loads, generated element-identical to the whole-tensor helpers
// (parameters from `seed`, inputs from seed + 1, as the threads backend does).
TensorMap shard_feeds(const Graph& g, const DeviceProgram& p, uint64_t seed, int64_t int_hi) {
  std::map<ValueId, Box> hull;
  for (const Instr& in : p.instrs) {
    if (in.kind != Instr::Kind::kLoad) continue;
    auto [it, fresh] = hull.emplace(in.value, in.box);
    if (fresh || in.box.empty()) continue;
    std::vector<int64_t> s(in.box.rank()), e(in.box.rank());
    for (int64_t d = 0; d < in.box.rank(); ++d) {
      s[d] = std::min(it->second.start()[d], in.box.start()[d]);
      e[d] = std::max(it->second.end()[d], in.box.end()[d]);
    }
    it->second = Box(IVec(std::move(s)), IVec(std::move(e)));
  }
  TensorMap feeds;
  for (const auto& [v, box] : hull) {
    const Value& val = g.value(v);
    feeds.emplace(v, val.role == ValueRole::kParam
                         ? init_param_tile(val.name, g.type(v), seed, box)
                         : random_input_tile(val.name, g.type(v), seed + 1, int_hi, box));
  }
  return feeds;
}

// Bytes a tensor of `numel` elements of `dtype` takes in memory (fp32 or int64 storage).
int64_t storage_bytes(DType dtype, int64_t numel) {
  return numel * (dtype_is_float(dtype) ? 4 : 8);
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

// How a run's outputs compare with the single-device interpreter.
struct RunCheck {
  bool ok = true;
  double max_abs = 0, max_rel = 0;
  double reference_time_s = 0;
};

// The single-device interpreter (parameters from o.seed) on `inputs`, compared with `got`.
Result<RunCheck> check_against_reference(const Graph& g, const RunOptions& o,
                                         const std::vector<Tensor>& inputs, const TensorMap& got) {
  RunCheck c;
  Interpreter interp(g, {.seed = o.seed, .blas_threads = 1});
  auto t1 = std::chrono::steady_clock::now();
  auto want = interp.run(inputs);
  c.reference_time_s = seconds_since(t1);
  if (!want.ok()) return want.error();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Tensor& a = (*want)[k];
    const Tensor& b = got.at(g.outputs()[k]);
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.is_int() ? a.i64()[i] : a.f32()[i];
      double y = b.is_int() ? b.i64()[i] : b.f32()[i];
      double err = std::fabs(x - y);
      if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
      c.max_abs = std::max(c.max_abs, err);
      c.max_rel = std::max(c.max_rel, err / std::max(std::fabs(x), 1e-6));
      if (err > o.atol + o.rtol * std::fabs(x)) c.ok = false;
    }
  }
  return c;
}

// The threads backend's summary (or JSON) for a forward run; 1 on a mismatch.
int report_run(const RunOptions& o, const Graph& g, const PlannedRun& planned,
               const std::vector<DeviceProgram>& programs, const std::string& devices_text,
               double wall, const TensorMap& outputs, const RunCheck* check,
               int64_t rank_feed_bytes_max, const std::vector<double>& losses) {
  int64_t model_feed_bytes = 0;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids)
      model_feed_bytes += storage_bytes(g.type(v).dtype(), g.type(v).shape().product());
  const ShardingPlan& plan = planned.propagation.plan;
  ProgramStats stats = program_stats(g, programs);
  if (o.json) {
    nlohmann::json j = {{"ok", check == nullptr || check->ok},
                        {"devices", plan.mesh.num_devices()},
                        {"backend", o.backend},
                        {"mesh", plan.mesh.to_string()},
                        {"strategy", planned.spec.to_string()},
                        {"wall_time_s", wall},
                        {"collectives", stats.collectives},
                        {"reshards", planned.propagation.reshards.size()},
                        {"output_digest", output_digest(g, outputs)},
                        {"rank_feed_bytes_max", rank_feed_bytes_max},
                        {"model_feed_bytes", model_feed_bytes}};
    if (o.train) j["loss"] = losses;
    if (check) {
      j["max_abs_error"] = check->max_abs;
      j["max_rel_error"] = check->max_rel;
      j["reference_time_s"] = check->reference_time_s;
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops)\n", g.name(), g.num_ops());
    fmt::print("plan       {}\n", planned.note);
    fmt::print("devices    {}\n", devices_text);
    fmt::print(
        "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
        "fetches over all devices\n",
        stats.kernels, stats.fused, stats.collectives, stats.fetches);
    if (!planned.propagation.reshards.empty())
      fmt::print(
          "reshards   {} inserted by propagation (heddle show MODEL --mesh ... --strategy "
          "... lists them)\n",
          planned.propagation.reshards.size());
    fmt::print(
        "shards     the largest rank generated {} of the {} bytes of parameters and inputs\n",
        rank_feed_bytes_max, model_feed_bytes);
    fmt::print("wall time  {:.4f} s{}\n", wall,
               o.train ? " for " + std::to_string(losses.size()) + " steps" : "");
    if (check) {
      fmt::print("reference  {:.4f} s (single-device interpreter)\n", check->reference_time_s);
      fmt::print("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n",
                 check->max_abs, check->max_rel, o.atol, o.rtol);
      fmt::print("check      {}\n",
                 check->ok ? "ok: every output matches the reference" : "MISMATCH");
    }
  }
  if (check && !check->ok) {
    std::fprintf(stderr,
                 "error: outputs differ from the reference beyond tolerance "
                 "(max abs %.3g, max rel %.3g)\n",
                 check->max_abs, check->max_rel);
    return 1;
  }
  return 0;
}

int run_rank(const RunOptions& o, const Graph& g, const std::vector<ParamUpdate>& updates,
             const PlannedRun& planned, const std::vector<DeviceProgram>& programs,
             MpiCommunicator& mpi) {
  const int64_t r = mpi.rank();
  // A failure that leaves this rank out of step with the others ends the whole job.
  auto die = [&](const std::string& message) {
    std::fprintf(stderr, "heddle: rank %lld: error: %s\n", static_cast<long long>(r),
                 message.c_str());
    mpi.abort_job(message);
  };
  if (auto st = mpi.prepare(mesh_partitions(planned.propagation.plan.mesh)); !st.ok())
    die(st.error().message);

  std::optional<FaultInjector> injector;
  Communicator* comm = &mpi;
  if (env_or("HEDDLE_TEST_FAIL_RANK", "-1") == std::to_string(r)) {
    injector.emplace(mpi, std::atoll(env_or("HEDDLE_TEST_FAIL_AT", "1").c_str()),
                     env_or("HEDDLE_TEST_FAIL_MODE", "throw"));
    comm = &*injector;
  }
  const int64_t int_hi = integer_range(g);
  const DeviceProgram& own = programs.size() == 1 ? programs[0] : programs[r];
  HEDDLE_ASSERT(own.device == r) << "rank " << r << " holds the program of device " << own.device;
  TensorMap feeds = shard_feeds(g, own, o.seed, int_hi);
  int64_t feed_bytes = 0;
  for (const auto& [v, t] : feeds) feed_bytes += storage_bytes(t.dtype(), t.numel());
  auto rank_feed_bytes_max = mpi.max_over_ranks(feed_bytes);
  if (!rank_feed_bytes_max.ok()) die(rank_feed_bytes_max.error().message);

  // Start together, so rank 0's wall time is the run's.
  if (auto ready = mpi.agree_on_failure(true); !ready.ok()) die(ready.error().message);
  double wall = 0;
  std::vector<double> losses;
  Result<TensorMap> got = Diagnostic("not run");
  const int steps = o.train ? o.steps : 1;
  for (int step = 1; step <= steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    try {
      got = run_device(g, own, *comm, feeds, {.optimizer_step = o.train ? step : 0});
    } catch (const std::exception& e) {
      die(e.what());
    }
    if (mpi.failure()) die(mpi.failure()->message);
    // Errors that kept this rank in step (a kernel's diagnostic): every rank learns the first.
    auto failed = mpi.agree_on_failure(got.ok());
    if (!failed.ok()) die(failed.error().message);
    wall += seconds_since(t0);
    if (*failed >= 0) {
      if (*failed == r)
        std::fprintf(stderr, "heddle: rank %lld: %s\n", static_cast<long long>(r),
                     got.error().to_string().c_str());
      else
        std::fprintf(stderr, "heddle: rank %lld: error: rank %lld failed; stopping\n",
                     static_cast<long long>(r), static_cast<long long>(*failed));
      return 1;
    }
    if (!o.train) break;
    // Outputs are whole on every rank (lowering replicates them): keep this rank's tiles of the
    // updated parameters and optimizer state for the next step.
    double loss = got->at(g.outputs()[0]).f32()[0];
    losses.push_back(loss);
    if (r == 0 && !o.json) fmt::print("step {:>4}  loss {:.6f}\n", step, loss);
    auto keep = [&](ValueId param, ValueId updated) {
      if (auto it = feeds.find(param); it != feeds.end())
        it->second = got->at(updated).crop(it->second.region());
    };
    for (const auto& u : updates) {
      keep(u.param, u.updated);
      for (const auto& st : u.state) keep(st.first, st.second);
    }
  }
  if (r != 0) return 0;

  // Rank 0 holds every output whole (lowering replicates them).
  for (ValueId v : g.outputs()) {
    auto it = got->find(v);
    if (it == got->end() || it->second.region() != Box::of_shape(g.type(v).shape()))
      return user_error(Diagnostic("output " + g.value(v).name + " is not whole on rank 0"));
  }
  std::optional<RunCheck> check;
  if (o.check) {
    // The reference needs the whole model: only rank 0 builds it, and only for --check.
    auto c = check_against_reference(g, o, random_inputs(g, o.seed + 1, int_hi), *got);
    if (!c.ok()) return user_error(c.error());
    check = *c;
  }
  return report_run(o, g, planned, programs, fmt::format("{} MPI ranks", mpi.size()), wall, *got,
                    check ? &*check : nullptr, *rank_feed_bytes_max, losses);
}

}  // namespace

int run_mpi(const RunOptions& o) {
  // Everything up to lowering is local and deterministic, so every rank finds the same mistake;
  // only rank 0 says so, and no rank has started MPI yet.
  const bool root = MpiEnvironment::launcher_rank() == 0;
  auto bad_input = [&](const Diagnostic& d) { return root ? user_error(d) : 1; };
  if (o.timeout_s <= 0)
    return bad_input(Diagnostic("--timeout must be a positive number of seconds"));
  if (o.train && o.check)
    return bad_input(Diagnostic(
        "--train --check runs on --backend threads only for now; MPI training reports the loss "
        "(equal to the threads backend's, bit for bit)"));
  if (o.steps < 1) return bad_input(Diagnostic("--steps must be >= 1"));
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return bad_input(Diagnostic("--optimizer must be adamw or sgd, got '" + o.optimizer + "'"));
  zoo::ModelOptions mo;
  mo.with_loss = o.train;
  auto model = resolve_model(o.model, o.overrides, mo);
  if (!model.ok()) return bad_input(model.error());
  if (root ? report_verify(*model) != 0 : !verify(*model).empty()) return 1;
  Graph g = std::move(*model);
  std::vector<ParamUpdate> updates;
  if (o.train) {  // the same training step the threads backend builds
    auto step = make_train_step(o, g);
    if (!step.ok()) return bad_input(step.error());
    updates = std::move(*step);
  }
  auto planned = plan_run(g, o.mesh, o.strategy);
  if (!planned.ok()) return bad_input(planned.error());
  const Mesh& mesh = planned->propagation.plan.mesh;
  // Rank 0 lowers every device (the summary counts them all, --emit writes them); the others
  // only their own. A rank beyond the mesh lowers all, to fail on the rank count below.
  LowerOptions lower_options;
  const int64_t launcher = MpiEnvironment::launcher_rank();
  if (!root && launcher < mesh.num_devices()) lower_options.devices = {launcher};
  auto programs = lower(g, planned->propagation.plan, lower_options);
  if (!programs.ok()) return bad_input(programs.error());
  if (root && !o.emit_dir.empty())
    if (auto s = write_programs(o.emit_dir, g, mesh, *programs); !s.ok())
      return user_error(s.error());

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
  return run_rank(o, g, updates, *planned, *programs, mpi);
}

}  // namespace heddle::cli
