// The runtime at work, as ratios measured in one run:
// - a GEMM-heavy MLP with tp=2 on two thread-devices against the same model on one device;
// - the executor's per-instruction overhead (tiny elementwise ops, 1 and 4 devices);
// - lowering gpt3-175b (forward and training step) on a 1,024-device mesh (shape only, nothing
//   runs): one device's program (what an MPI rank builds) and every device's.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <sys/resource.h>

#include <chrono>
#include <map>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Models.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

struct Prepared {
  Graph g;
  std::vector<DeviceProgram> programs;
  TensorMap feeds;
};

Prepared prepare(Graph g, const char* strategy, int64_t devices) {
  Prepared p{std::move(g), {}, {}};
  auto spec = *StrategySpec::parse(strategy);
  Mesh mesh = *spec.mesh(devices);
  auto plan = plan_from_strategy(p.g, mesh, spec);
  p.programs = std::move(*lower(p.g, plan->plan));
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
