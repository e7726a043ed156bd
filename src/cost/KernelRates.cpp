#include "heddle/cost/KernelRates.h"

#include <algorithm>
#include <ctime>
#include <random>
#include <thread>
#include <vector>

#include "heddle/cost/ComputeCost.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle::cost {

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Sample {
  std::string kind, key;  // kind name, and kernel_rate_key() when it says more
  double points = 0;
  double seconds = 0;  // best over the repeats
};

// The training step of a zoo model at calibration size.
Graph calibration_graph(const char* name, const zoo::ZooOverrides& over) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto g = zoo::build_zoo_model(name, over, mo);
  HEDDLE_ASSERT(g.ok()) << g.error().to_string();
  auto step = build_train_step(*g);
  HEDDLE_ASSERT(step.ok()) << step.error().to_string();
  return std::move(step->graph);
}

// Runs every op of `g` in order over its whole index space; `samples` gets each op's time.
void time_ops(const Graph& g, std::vector<Sample>& samples) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> vals(static_cast<size_t>(g.num_values()));
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      Tensor t(g.type(v));
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (t.is_int())
          t.i64()[i] = static_cast<int64_t>(rng() % 3);
        else
          t.f32()[i] = u(rng);
      }
      vals[static_cast<size_t>(v)] = std::move(t);
    }
  if (samples.empty()) samples.resize(static_cast<size_t>(g.num_ops()), Sample{"", "", 0, 1e30});
  kernels::KernelOptions ko;
  ko.optimizer_step = 1;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(&vals[static_cast<size_t>(x.value)]);
    double t0 = thread_cpu_seconds();
    std::vector<Tensor> outs;
    for (const auto& r : op.results)
      outs.push_back(Tensor::tile(g.type(r.value).dtype(), r.proj.image(op.space.box())));
    std::vector<Tensor*> ptrs;
    for (auto& t : outs) ptrs.push_back(&t);
    Status st = kernels::run(op, op.space.box(), ins, ptrs, ko);
    double dt = thread_cpu_seconds() - t0;
    HEDDLE_ASSERT(st.ok()) << st.error().to_string();
    for (size_t r = 0; r < op.results.size(); ++r)
      vals[static_cast<size_t>(op.results[r].value)] = std::move(outs[r]);
    Sample& s = samples[static_cast<size_t>(id)];
    s.kind = std::string(op_kind_name(op.kind));
    s.key = kernel_rate_key(op);
    s.points = kernel_elements(op, op.space.box());
    s.seconds = std::min(s.seconds, dt);
  }
}

}  // namespace

std::map<std::string, double> measure_kernel_rates(const KernelRateOptions& o) {
  HEDDLE_ASSERT(o.threads >= 1 && o.repeats >= 1 && o.launch_s >= 0) << "kernel rate options";
  const std::pair<const char*, zoo::ZooOverrides> all[] = {
      {"mlp", zoo::ZooOverrides::sized(128, {}, {}, {})},
      {"gpt-tiny", zoo::ZooOverrides::sized(4, 128, 64, {})},
      {"llama-tiny", zoo::ZooOverrides::sized(4, 128, 64, {})},
      {"moe-tiny", zoo::ZooOverrides::sized(4, 64, 32, {})},
      {"vit-b16", zoo::ZooOverrides::sized(1, 96, {}, 1)},
  };
  std::vector<Graph> graphs;
  for (const auto& [name, sizes] : all)
    if (o.models.empty() ||
        std::find(o.models.begin(), o.models.end(), std::string(name)) != o.models.end())
      graphs.push_back(calibration_graph(name, sizes));
  // Every thread runs the same sequence at once, as device threads share the cores' caches and
  // memory; thread 0's times are kept.
  std::vector<std::vector<Sample>> samples(graphs.size());
  auto body = [&](bool keep) {
    std::vector<std::vector<Sample>> mine(graphs.size());
    for (int r = 0; r < o.repeats; ++r)
      for (size_t i = 0; i < graphs.size(); ++i) time_ops(graphs[i], mine[i]);
    if (keep) samples = std::move(mine);
  };
  std::vector<std::thread> others;
  for (int64_t t = 1; t < o.threads; ++t) others.emplace_back(body, false);
  body(true);
  for (auto& t : others) t.join();
  std::map<std::string, std::pair<double, double>> sums;  // kind -> (seconds, points)
  for (const auto& per_graph : samples)
    for (const Sample& s : per_graph) {
      if (s.kind == "einsum" || s.points <= 0) continue;
      double sec = std::max(s.seconds - o.launch_s, 0.0);
      for (const std::string* k : {&s.kind, &s.key}) {
        if (k == &s.key && s.key == s.kind) continue;
        sums[*k].first += sec;
        sums[*k].second += s.points;
      }
    }
  std::map<std::string, double> rates;
  for (const auto& [kind, sp] : sums) rates[kind] = std::max(sp.first / sp.second, 1e-12);
  return rates;
}

}  // namespace heddle::cost
