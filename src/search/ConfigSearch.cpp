#include "heddle/search/ConfigSearch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

struct Layout {
  int64_t tp, pp, dp, mb;
  std::string schedule;
};

}  // namespace

Result<ConfigSearch> search_configs(const cost::ModelSource& model, const cost::Cluster& cluster,
                                    const ConfigSearchOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t n = cluster.count;
  int64_t layer_units = model.layers > 0 ? model.layers / std::max<int64_t>(model.unit, 1) : 0;
  std::vector<Layout> layouts;
  // Widest tensor parallelism first (within a node it is usually best for large models), so a
  // time limit cuts off the less promising layouts.
  std::vector<int64_t> tps = divisors(n);
  std::reverse(tps.begin(), tps.end());
  for (int64_t tp : tps) {
    if (tp > cluster.devices_per_node || (o.pins.tp && *o.pins.tp != tp)) continue;
    for (int64_t pp : divisors(n / tp)) {
      if (o.pins.pp && *o.pins.pp != pp) continue;
      if (pp > 1 && (layer_units == 0 || layer_units % pp != 0)) continue;
      int64_t dp = n / tp / pp;
      if (o.pins.dp && *o.pins.dp != dp) continue;
      if (model.rebuilds_batch && model.batch % dp != 0) continue;
      int64_t per_replica = model.rebuilds_batch ? model.batch / dp : 1;
      for (int64_t mb : {1, 2, 4, 8}) {
        if (o.pins.micro_batch && *o.pins.micro_batch != mb) continue;
        if (per_replica % mb != 0) continue;
        std::vector<std::string> schedules = {"1f1b"};
        if (pp > 1 && layer_units % (2 * pp) == 0) schedules.push_back("interleaved:2");
        if (o.pins.schedule) schedules = {*o.pins.schedule};
        for (const auto& s : schedules) layouts.push_back({tp, pp, dp, mb, s});
      }
    }
  }
  struct Rung {
    int64_t zero;
    const char* recompute;
  };
  std::vector<Rung> ladder = {{0, "none"}};
  if (o.train) ladder = {{0, "none"}, {1, "selective"}, {1, "full"}, {3, "full"}};
  if (o.pins.zero || o.pins.recompute) {
    std::vector<Rung> kept;
    for (const auto& r : ladder)
      if ((!o.pins.zero || *o.pins.zero == r.zero) &&
          (!o.pins.recompute || *o.pins.recompute == r.recompute))
        kept.push_back(r);
    if (kept.empty())
      kept.push_back(
          {o.pins.zero.value_or(0), o.pins.recompute ? o.pins.recompute->c_str() : "none"});
    ladder = kept;
  }
  if (layouts.empty())
    return Diagnostic("no parallel layout of " + std::to_string(n) +
                      " devices fits the model "
                      "and the pins " +
                      o.pins.to_string() + " (tp <= " + std::to_string(cluster.devices_per_node) +
                      " per node, pp dividing " + std::to_string(layer_units) +
                      " layers, dp dividing the batch " + std::to_string(model.batch) + ")");
  ConfigSearch out;
  out.candidates = static_cast<int64_t>(layouts.size() * ladder.size());
  std::optional<ConfigResult> smallest;    // least memory among the infeasible, for the message
  std::optional<std::string> first_error;  // why the first failed simulation failed
  std::vector<ConfigResult> feasible;
  // The time limit is checked before every simulation, and a simulation that would end past it
  // (judged by the slowest one so far) is not started: a single simulation of a large model on
  // thousands of devices takes most of a second, so checking per layout overran by many seconds.
  double slowest = 0;
  auto out_of_time = [&] {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return elapsed > o.time_limit_s || (out.evaluated > 0 && elapsed + slowest > o.time_limit_s);
  };
  for (size_t i = 0; i < layouts.size() && out.complete; ++i) {
    const Layout& l = layouts[i];
    for (const Rung& r : ladder) {
      if (out_of_time()) {
        out.complete = false;
        break;
      }
      StrategySpec spec;
      spec.dp = l.dp;
      spec.tp = l.tp;
      spec.pp = l.pp;
      // A model simulated as one graph takes its whole per-replica batch as one micro-batch.
      if (model.rebuilds_batch) spec.micro_batch = l.mb;
      spec.zero = r.zero;
      spec.recompute = r.recompute;
      spec.sp = o.pins.sp;
      if (l.pp > 1) spec.schedule = l.schedule;
      cost::SimulateOptions so;
      so.train = o.train;
      auto t_sim = std::chrono::steady_clock::now();
      auto sim = cost::simulate(model, cluster, spec, so);
      slowest = std::max(
          slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t_sim).count());
      ++out.evaluated;
      if (o.progress) o.progress(out.evaluated, out.candidates);
      if (!sim.ok()) {
        if (!first_error)
          first_error = sim.error().message + " (strategy " + spec.to_string() + ")";
        continue;
      }
      ConfigResult c{spec, std::move(*sim)};
      if (c.sim.feasible) {
        feasible.push_back(std::move(c));
        break;  // the first rung that fits is the cheapest in time for this layout
      }
      if (!smallest || c.sim.peak_memory_bytes < smallest->sim.peak_memory_bytes) smallest = c;
    }
  }
  out.search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (feasible.empty()) {
    if (!smallest && out.evaluated == 0) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", o.time_limit_s);
      return Diagnostic("the time limit of " + std::string(limit) +
                        " s ran out before the first of " + std::to_string(out.candidates) +
                        " configurations was simulated; raise --time-limit");
    }
    if (!smallest)
      return Diagnostic("no configuration could be simulated for this model on " + cluster.name +
                        (first_error ? ": " + *first_error : std::string()));
    if (!out.complete)
      return Diagnostic("the time limit ran out after " + std::to_string(out.evaluated) + " of " +
                        std::to_string(out.candidates) +
                        " configurations, none of which fits; the smallest so far needs " +
                        human_bytes(smallest->sim.peak_memory_bytes) + " per device of " +
                        human_bytes(smallest->sim.memory_limit_bytes) + "; raise --time-limit");
    return Diagnostic("no plan fits in " + human_bytes(smallest->sim.memory_limit_bytes) +
                      " per device; the smallest found needs " +
                      human_bytes(smallest->sim.peak_memory_bytes) + " (strategy " +
                      smallest->sim.strategy + ")");
  }
  std::stable_sort(feasible.begin(), feasible.end(),
                   [](const ConfigResult& a, const ConfigResult& b) {
                     return a.sim.step_time_s < b.sim.step_time_s;
                   });
  out.best = feasible.front();
  for (size_t k = 0; k < feasible.size() && k < 10; ++k) out.ranking.push_back(feasible[k]);
  return out;
}

}  // namespace heddle::search
