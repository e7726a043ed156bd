// Sharding at scale, as ratios measured in one run: planning the gpt3-175b training step
// (plan_from_strategy: tactic pins, then propagation over every op) on 64 to 1,024 devices, with
// derive_placements() checking only the shards that decide the outcome against checking every
// shard in turn (ShardCheck::kEvery, the previous behaviour). The model is cut to a few layers so
// the straightforward check finishes in seconds; the per-layer work is the same at 96 layers.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

// The training step of gpt3-175b (hidden 12,288, sequence 2,048) with `layers` layers and batch
// `batch`.
const Graph& gpt3_train(int64_t layers, int64_t batch) {
  static std::map<std::pair<int64_t, int64_t>, Graph> cache;
  auto key = std::make_pair(layers, batch);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  zoo::ZooOverrides over;
  over.layers = layers;
  over.batch = batch;
  zoo::ModelOptions mo;
  mo.with_loss = true;
  Graph g = std::move(*zoo::build_zoo_model("gpt3-175b", over, mo));
  return cache.emplace(key, std::move(build_train_step(g)->graph)).first->second;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Wall-clock and CPU seconds of f() (CPU time is what to compare on a loaded machine).
std::pair<double, double> seconds(auto&& f) {
  double c0 = thread_cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          thread_cpu_seconds() - c0};
}

// range(0): devices, planned dp=devices/8, tp=8 (batch = dp: one sequence per replica);
// range(1): layers. Each iteration plans with both checks; the best time of each is kept.
void BM_PlanGpt3Train(benchmark::State& state) {
  int64_t devices = state.range(0), layers = state.range(1);
  const Graph& g = gpt3_train(layers, devices / 8);
  auto spec = *StrategySpec::parse("dp=" + std::to_string(devices / 8) + ",tp=8");
  Mesh mesh = *spec.mesh(devices);
  PropagateOptions every;
  every.shard_check = ShardCheck::kEvery;
  double t_fast = 1e30, t_every = 1e30, c_fast = 1e30, c_every = 1e30;
  for (auto _ : state) {
    std::optional<Result<Propagation>> fast, slow;
    auto [wf, cf] = seconds([&] { fast = plan_from_strategy(g, mesh, spec); });
    auto [we, ce] = seconds([&] { slow = plan_from_strategy(g, mesh, spec, every); });
    t_fast = std::min(t_fast, wf);
    c_fast = std::min(c_fast, cf);
    t_every = std::min(t_every, we);
    c_every = std::min(c_every, ce);
    if (!fast->ok() || !slow->ok())
      state.SkipWithError("planning failed");
    else if (!((*fast)->plan == (*slow)->plan))
      state.SkipWithError("the plans differ");
  }
  double load[1] = {0};
  getloadavg(load, 1);
  state.counters["ops"] = static_cast<double>(g.num_ops());
  state.counters["deciding_s"] = t_fast;
  state.counters["every_s"] = t_every;
  state.counters["deciding_cpu_s"] = c_fast;
  state.counters["every_cpu_s"] = c_every;
  state.counters["every_over_deciding_cpu"] = c_every / c_fast;
  state.counters["load_avg_1min"] = load[0];
}
BENCHMARK(BM_PlanGpt3Train)
    ->ArgsProduct({{64, 128, 256, 512, 1024}, {2}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

// The full 96-layer model on 1,024 devices with the deciding check only (the straightforward
// check takes minutes here): what `heddle show gpt3-175b --train --strategy dp=128,tp=8` plans.
void BM_PlanGpt3TrainFull(benchmark::State& state) {
  const Graph& g = gpt3_train(96, 128);
  auto spec = *StrategySpec::parse("dp=128,tp=8");
  Mesh mesh = *spec.mesh(1024);
  double cpu = 0;
  for (auto _ : state)
    cpu = seconds([&] {
            if (!plan_from_strategy(g, mesh, spec).ok()) state.SkipWithError("planning failed");
          }).second;
  state.counters["ops"] = static_cast<double>(g.num_ops());
  state.counters["cpu_s"] = cpu;
}
BENCHMARK(BM_PlanGpt3TrainFull)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace heddle

BENCHMARK_MAIN();
