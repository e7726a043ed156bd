// Cost model and simulator benchmark: time to simulate every Megatron-LM Table 1 row (the 1T
// row: 3,072 GPUs, 64 stages, 512 micro-batches), simulated events per second, and predicted
// against measured forward step time of the threaded executor on this machine (`--cluster cpu`).
// A third table costs one device running the kernels in sequence (no executor, no threads).
// Prints markdown tables.
//
// Usage: bench_cost [--no-cpu]   (--no-cpu: skip the executor measurements)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "heddle/cost/Simulator.h"
#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"

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

TensorMap feeds_for(const Graph& g) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  TensorMap feeds;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      Tensor t(g.type(v));
      if (t.is_int()) {
        int64_t hi = 2;
        for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = static_cast<int64_t>(rng() % hi);
      } else {
        for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
      }
      feeds.emplace(v, std::move(t));
    }
  return feeds;
}

// One thread running every op's kernel over its whole index space, in order (no executor).
double kernel_sequence_seconds(const Graph& g, const TensorMap& feeds) {
  std::map<ValueId, Tensor> vals(feeds.begin(), feeds.end());
  auto t0 = Clock::now();
  for (const Op& op : g.ops()) {
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(&vals.at(x.value));
    std::vector<Tensor> outs;
    for (const auto& r : op.results) outs.emplace_back(g.type(r.value));
    std::vector<Tensor*> ptrs;
    for (auto& t : outs) ptrs.push_back(&t);
    if (!kernels::run(op, op.space.box(), ins, ptrs).ok()) return -1;
    for (size_t r = 0; r < op.results.size(); ++r)
      vals.insert_or_assign(op.results[r].value, std::move(outs[r]));
  }
  return since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const bool cpu = !(argc > 1 && std::strcmp(argv[1], "--no-cpu") == 0);
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
    auto src = cost::zoo_model_source(r.model, o);
    double best = 1e30;
    int64_t events = 0, m = 0;
    cost::SimulateOptions training;
    training.train = true;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = Clock::now();
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
  if (!cpu) return 0;
  auto cluster = cost::resolve_cluster("cpu");
  if (!cluster.ok()) return 1;
  fmt::print("\ncpu profile: {}\n\n", cluster->source);
  fmt::print("| model | strategy | predicted (s) | measured (s, best of 3) | error |\n");
  fmt::print("|---|---|---|---|---|\n");
  struct Case {
    const char* model;
    zoo::ZooOverrides over;
    const char* strategy;
  };
  auto over = [](int64_t batch, std::optional<int64_t> hidden = {},
                 std::optional<int64_t> seq = {}) {
    zoo::ZooOverrides o;
    o.batch = batch;
    o.hidden = hidden;
    o.seq = seq;
    return o;
  };
  std::vector<double> errors;
  for (const Case& c :
       {Case{"mlp", over(512), "dp=2"}, Case{"mlp", over(512), "tp=2"},
        Case{"gpt-tiny", over(8, 256, 128), "dp=2"}, Case{"gpt-tiny", over(8, 256, 128), "tp=2"},
        Case{"llama-tiny", over(8, 256, 128), "dp=2"}, Case{"vit-b16", over(2), "dp=2"}}) {
    auto src = cost::zoo_model_source(c.model, c.over);
    auto spec = StrategySpec::parse(c.strategy);
    if (!src.ok() || !spec.ok()) continue;
    auto pred = cost::simulate(*src, *cluster, *spec);
    if (!pred.ok()) {
      fmt::print("| {} | {} | error: {} |\n", c.model, c.strategy, pred.error().message);
      continue;
    }
    auto g = src->build(src->layers, src->batch);
    auto mesh = spec->mesh(cluster->count);
    auto prop = cost::stage_plan(*g, *mesh, *cluster, *spec);
    if (!g.ok() || !mesh.ok() || !prop.ok()) continue;
    auto progs = lower(*g, prop->plan);
    if (!progs.ok()) {
      fmt::print("| {} | {} | lower: {} |\n", c.model, c.strategy, progs.error().message);
      continue;
    }
    TensorMap feeds = feeds_for(*g);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = Clock::now();
      auto out = run_threaded(*g, *progs, feeds);
      best = std::min(best, since(t0));
      if (!out.ok()) break;
    }
    double err = (pred->step_time_s - best) / best;
    errors.push_back(std::abs(err));
    fmt::print("| {} | {} | {:.4g} | {:.4g} | {:+.0f}% |\n", c.model, c.strategy, pred->step_time_s,
               best, 100 * err);
  }
  std::sort(errors.begin(), errors.end());
  if (!errors.empty())
    fmt::print("\nmedian absolute error {:.0f}%\n", 100 * errors[errors.size() / 2]);
  // The cost model without the executor: one device (one thread) running the kernels in order.
  cost::Cluster one = *cluster;
  one.count = 1;
  fmt::print(
      "\n| model | predicted, 1 device (s) | kernels in sequence (s, best of 3) | error |\n");
  fmt::print("|---|---|---|---|\n");
  errors.clear();
  for (const Case& c :
       {Case{"mlp", over(512), "dp=1"}, Case{"gpt-tiny", over(8, 256, 128), "dp=1"},
        Case{"llama-tiny", over(8, 256, 128), "dp=1"}, Case{"vit-b16", over(2), "dp=1"}}) {
    auto src = cost::zoo_model_source(c.model, c.over);
    auto spec = StrategySpec::parse(c.strategy);
    if (!src.ok() || !spec.ok()) continue;
    auto pred = cost::simulate(*src, one, *spec);
    auto g = src->build(src->layers, src->batch);
    if (!pred.ok() || !g.ok()) continue;
    TensorMap feeds = feeds_for(*g);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) best = std::min(best, kernel_sequence_seconds(*g, feeds));
    double err = (pred->step_time_s - best) / best;
    errors.push_back(std::abs(err));
    fmt::print("| {} | {:.4g} | {:.4g} | {:+.0f}% |\n", c.model, pred->step_time_s, best,
               100 * err);
  }
  std::sort(errors.begin(), errors.end());
  if (!errors.empty())
    fmt::print("\nmedian absolute error {:.0f}%\n", 100 * errors[errors.size() / 2]);
  return 0;
}
