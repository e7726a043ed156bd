// Cost model and simulator benchmark: time to simulate every Megatron-LM Table 1 row (the 1T
// row: 3,072 GPUs, 64 stages, 512 micro-batches) and simulated events per second, as a markdown
// table. Predicted against measured step time on this machine is bench_validate_cpu.
//
// Usage: bench_cost [--no-cpu]   (--no-cpu is accepted for old scripts and changes nothing)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "heddle/cost/Simulator.h"

using namespace heddle;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Row {
  const char* model;
  int64_t layers, t, p, d, batch;
};

}  // namespace

int main() {
  const Row rows[] = {
      {"megatron-1.7b", 24, 1, 1, 32, 512},     {"megatron-3.6b", 30, 2, 1, 32, 512},
      {"megatron-7.5b", 36, 4, 1, 32, 512},     {"megatron-18.4b", 40, 8, 1, 32, 1024},
      {"megatron-39.1b", 48, 8, 2, 32, 1536},   {"megatron-76.1b", 60, 8, 4, 32, 1792},
      {"megatron-145.6b", 80, 8, 8, 24, 2304},  {"megatron-310.1b", 96, 8, 16, 15, 2160},
      {"megatron-529.6b", 105, 8, 35, 9, 2520}, {"megatron-1t", 128, 8, 64, 6, 3072},
  };
  fmt::print("| row | GPUs | micro-batches | events | simulate time (s, best of 5) | events/s |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    int64_t per = r.layers / r.p;
    std::string schedule = r.p == 1 ? "1f1b" : per % 2 == 0 ? "interleaved:2" : "interleaved:3";
    auto spec = StrategySpec::parse(
        fmt::format("dp={},tp={},pp={},mb=1,recompute=full,schedule={}", r.d, r.t, r.p, schedule));
    auto cluster = cost::cluster_preset(fmt::format("a100x{}", r.t * r.p * r.d));
    zoo::ZooOverrides o;
    o.batch = r.batch;
    auto src = model::zoo_scalable_model(r.model, o);
    double best = 1e30;
    int64_t events = 0, m = 0;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = Clock::now();
      cost::SimulateOptions training;
      training.train = true;
      auto res = cost::simulate(*src, *cluster, *spec, training);
      double dt = since(t0);
      if (!res.ok()) {
        fmt::print("| {} | error: {} |\n", r.model, res.error().message);
        break;
      }
      best = std::min(best, dt);
      events = res->events;
      m = res->micro_batches;
    }
    fmt::print("| {} | {} | {} | {} | {:.4f} | {:.3g} |\n", r.model, r.t * r.p * r.d, m, events,
               best, static_cast<double>(events) / best);
  }
  return 0;
}
