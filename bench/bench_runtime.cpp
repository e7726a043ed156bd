// The runtime at work, as ratios measured in one run:
// - a GEMM-heavy MLP with tp=2 on two thread-devices against the same model on one device;
// - the executor's per-instruction overhead (tiny elementwise ops, 1 and 4 devices);
// - lowering gpt3-175b (forward and training step) on a 1,024-device mesh (shape only, nothing
//   runs): one device's program (what an MPI rank builds) and every device's;
// - ring attention (cp_comm=ring) with each step's exchange overlapping the block kernel
//   (ExecOptions::overlap_ring) against blocking steps, and without skipping hidden blocks.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Models.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedCommunicator.h"
#include "heddle/runtime/ThreadedRunner.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

struct Prepared {
  Graph g;
  std::vector<DeviceProgram> programs;
  TensorMap feeds;
};

Prepared prepare(Graph g, const char* strategy, int64_t devices, const LowerOptions& lo = {}) {
  Prepared p{std::move(g), {}, {}};
  auto spec = *StrategySpec::parse(strategy);
  Mesh mesh = *spec.mesh(devices);
  auto plan = plan_from_strategy(p.g, mesh, spec);
  p.programs = std::move(*lower(p.g, plan->plan, lo));
  auto inputs = random_inputs(p.g, 1, 10);
  for (size_t i = 0; i < p.g.inputs().size(); ++i) p.feeds.emplace(p.g.inputs()[i], inputs[i]);
  for (ValueId v : p.g.params()) p.feeds.emplace(v, init_param(p.g.value(v).name, p.g.type(v), 1));
  return p;
}

Graph gemm_mlp() {
  zoo::MlpConfig c;
  c.batch = 256;
  c.inputs = 1024;
  c.hidden = 2048;
  c.layers = 3;
  c.classes = 256;
  return std::move(*zoo::build_mlp(c));
}

// state.range(0): devices (1 or 2), tp over all of them.
void BM_MlpTensorParallel(benchmark::State& state) {
  openblas_set_num_threads(1);  // parallelism comes from the devices, not from BLAS
  int64_t n = state.range(0);
  Prepared p = prepare(gemm_mlp(), n == 1 ? "dp=1" : "tp=2", n);
  for (auto _ : state) {
    auto out = run_threaded(p.g, p.programs, p.feeds);
    if (!out.ok()) state.SkipWithError(out.error().to_string().c_str());
  }
}
BENCHMARK(BM_MlpTensorParallel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The devices' programs on their own threads without run_threaded's BLAS setting: what
// run_threaded did before it made OpenBLAS single-threaded while several device threads run.
void run_unguarded(const Prepared& p) {
  ThreadedWorld world(static_cast<int64_t>(p.programs.size()));
  std::vector<std::thread> threads;
  for (size_t d = 0; d < p.programs.size(); ++d)
    threads.emplace_back([&, d] {
      (void)run_device(p.g, p.programs[d], world.endpoint(static_cast<int64_t>(d)), p.feeds);
    });
  for (auto& t : threads) t.join();
}

// The speedup of tp=2 on two thread-devices over one device, with every variant run in turn
// each iteration (so background load hits all alike) and the best time of each kept:
// - one device, 1 BLAS thread; one device, 2 BLAS threads (BLAS uses both cores itself);
// - tp=2 through run_threaded (each device's sgemm single-threaded);
// - tp=2 with 2 BLAS threads per device call (the previous behaviour).
void BM_MlpSpeedup(benchmark::State& state) {
  Prepared one = prepare(gemm_mlp(), "dp=1", 1), two = prepare(gemm_mlp(), "tp=2", 2);
  double t1 = 1e30, t1b = 1e30, t2 = 1e30, t2u = 1e30, c1 = 1e30, c2 = 1e30;
  auto cpu_now = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  double cpu = 0;  // process CPU time of the last timed call, all threads
  auto time = [&](auto&& f) {
    double c0 = cpu_now();
    auto t0 = std::chrono::steady_clock::now();
    f();
    cpu = cpu_now() - c0;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double load[1] = {0};
  for (auto _ : state) {
    openblas_set_num_threads(1);
    t1 = std::min(t1, time([&] { (void)run_threaded(one.g, one.programs, one.feeds); }));
    c1 = std::min(c1, cpu);
    t2 = std::min(t2, time([&] { (void)run_threaded(two.g, two.programs, two.feeds); }));
    c2 = std::min(c2, cpu);
    openblas_set_num_threads(2);
    t1b = std::min(t1b, time([&] { (void)run_threaded(one.g, one.programs, one.feeds); }));
    t2u = std::min(t2u, time([&] { run_unguarded(two); }));
  }
  openblas_set_num_threads(1);
  getloadavg(load, 1);
  state.counters["one_dev_1blas_ms"] = t1 * 1e3;
  state.counters["one_dev_2blas_ms"] = t1b * 1e3;
  state.counters["tp2_ms"] = t2 * 1e3;
  state.counters["tp2_2blas_unguarded_ms"] = t2u * 1e3;
  state.counters["speedup_vs_1blas"] = t1 / t2;
  state.counters["speedup_vs_2blas"] = t1b / t2;
  state.counters["speedup_unguarded_vs_1blas"] = t1 / t2u;
  state.counters["load_avg_1min"] = load[0];
  // CPU time of both devices together over one device's: above 1 is the executor's overhead
  // (collectives, copies); the wall-clock speedup also depends on getting two cores.
  state.counters["cpu_tp2_over_one_dev"] = c2 / c1;
}
BENCHMARK(BM_MlpSpeedup)->Iterations(5)->Unit(benchmark::kMillisecond)->UseRealTime();

// 2,000 elementwise ops on 16 elements per device: time per instruction.
void BM_InstructionOverhead(benchmark::State& state) {
  int64_t n = state.range(0);
  Graph g("chain");
  Ops o(g);
  ValueId x = o.input("x", TensorType(DType::kF32, IVec{16 * n}));
  ValueId b = o.param("b", TensorType(DType::kF32, IVec{16 * n}));
  for (int k = 0; k < 2000; ++k) x = o.add(x, b);  // adds do not fuse: each reads b too
  o.output(x);
  std::string strategy = n == 1 ? "dp=1" : "dp=" + std::to_string(n);
  Prepared p = prepare(std::move(g), strategy.c_str(), n);
  int64_t instrs = static_cast<int64_t>(p.programs[0].instrs.size());
  double seconds = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = run_threaded(p.g, p.programs, p.feeds);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!out.ok()) state.SkipWithError(out.error().to_string().c_str());
  }
  state.counters["instr_per_device"] = static_cast<double>(instrs);
  state.counters["us_per_instr"] =
      seconds / static_cast<double>(state.iterations()) / static_cast<double>(instrs) * 1e6;
}
BENCHMARK(BM_InstructionOverhead)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// A gpt-tiny forward step with a long sequence (range(1) tokens, hidden 128, batch 2) on
// range(2) thread-devices with cp=range(2) and cp_comm=ring; range(0): 1 overlaps each ring step
// with the block kernel before it, 0 runs the steps blocking; range(3): 1 leaves out the blocks
// the causal mask hides (LowerOptions::skip_hidden_blocks), 0 runs them all. Steady state (one
// ThreadedRunner).
void BM_RingOverlap(benchmark::State& state) {
  openblas_set_num_threads(1);
  const int64_t cp = state.range(2);
  zoo::ModelOptions mo;
  Graph g = std::move(
      *zoo::build_zoo_model("gpt-tiny", zoo::ZooOverrides::sized(2, 128, state.range(1)), mo));
  std::string strategy = "cp=" + std::to_string(cp) + ",cp_comm=ring";
  LowerOptions lo;
  lo.skip_hidden_blocks = state.range(3) == 1;
  Prepared p = prepare(std::move(g), strategy.c_str(), cp, lo);
  ThreadedRunner runner(p.g, p.programs);
  ExecOptions o;
  o.overlap_ring = state.range(0) == 1;
  o.threads = 1;
  TensorMap out;
  for (auto _ : state) {
    Status st = runner.run_into(p.feeds, out, o);
    if (!st.ok()) state.SkipWithError(st.error().to_string().c_str());
  }
}
BENCHMARK(BM_RingOverlap)
    ->Args({0, 512, 2, 1})
    ->Args({1, 512, 2, 1})
    ->Args({1, 512, 2, 0})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// gpt3-175b with batch 128 (one sequence per data-parallel replica): the forward graph
// (range 0) or the training step (range 1), planned dp=128, tp=8 on 1,024 devices.
struct Gpt175b {
  Graph g;
  Propagation plan;
};

const Gpt175b& gpt175b(bool train) {
  static std::map<bool, Gpt175b> cache;
  auto it = cache.find(train);
  if (it != cache.end()) return it->second;
  zoo::ZooOverrides batch;
  batch.batch = 128;
  zoo::ModelOptions mo;
  mo.with_loss = train;
  Graph g = std::move(*zoo::build_zoo_model("gpt3-175b", batch, mo));
  if (train) g = std::move(build_train_step(g)->graph);
  auto spec = *StrategySpec::parse("dp=128,tp=8");
  auto plan = plan_from_strategy(g, *spec.mesh(1024), spec);
  if (!plan.ok()) std::abort();
  return cache.emplace(train, Gpt175b{std::move(g), std::move(*plan)}).first->second;
}

double peak_rss_gb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1e6;
}

// lower() holding every requested program: range(1) devices (1: what an MPI rank builds).
void BM_LowerGpt175b(benchmark::State& state) {
  const Gpt175b& m = gpt175b(state.range(0) == 1);
  LowerOptions o;
  if (state.range(1) == 1) o.devices = {0};
  int64_t instrs = 0;
  for (auto _ : state) {
    auto progs = lower(m.g, m.plan.plan, o);
    if (!progs.ok()) state.SkipWithError(progs.error().to_string().c_str());
    instrs = 0;
    for (const auto& pr : *progs) instrs += static_cast<int64_t>(pr.instrs.size());
  }
  state.counters["ops"] = static_cast<double>(m.g.num_ops());
  state.counters["instructions"] = static_cast<double>(instrs);
  state.counters["peak_rss_GB"] = peak_rss_gb();
}
BENCHMARK(BM_LowerGpt175b)
    ->ArgsProduct({{0, 1}, {1, 1024}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The shared template (its size does not grow with the mesh), then every device's program
// instantiated from it one at a time and dropped, as the threaded executor's device threads and
// `heddle show --emit` do: range(1) devices instantiated.
void BM_LowerTemplateGpt175b(benchmark::State& state) {
  const Gpt175b& m = gpt175b(state.range(0) == 1);
  int64_t instrs = 0, templ = 0;
  double t_template = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto t = lower_template(m.g, m.plan.plan);
    if (!t.ok()) state.SkipWithError(t.error().to_string().c_str());
    t_template = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    templ = static_cast<int64_t>(t->instrs.size());
    instrs = 0;
    for (int64_t d = 0; d < state.range(1); ++d)
      instrs += static_cast<int64_t>(instantiate(m.g, *t, d).instrs.size());
  }
  state.counters["ops"] = static_cast<double>(m.g.num_ops());
  state.counters["template_s"] = t_template;
  state.counters["template_instrs"] = static_cast<double>(templ);
  state.counters["instructions"] = static_cast<double>(instrs);
  state.counters["peak_rss_GB"] = peak_rss_gb();
}
BENCHMARK(BM_LowerTemplateGpt175b)
    ->ArgsProduct({{0, 1}, {1, 1024}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace heddle

BENCHMARK_MAIN();
