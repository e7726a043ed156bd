#include "heddle/search/ConfigSearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/search/InterOp.h"
#include "heddle/search/IntraOp.h"
#include "heddle/search/KindStages.h"
#include "heddle/search/SubMeshes.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

struct Layout {
  int64_t tp, pp, dp, mb;
  pipeline::PipelineSchedule schedule;
  int64_t cp = 1;
};

// Sequences from this length on are long-context: the search tries context parallelism for them
// (below it, splitting the sequence only shrinks the GEMMs; Megatron-LM's and torchtitan's
// long-context recipes start at 32K tokens).
constexpr int64_t kLongSequence = 32768;

// The context-parallel degrees to try on `n` devices: the pinned one, else 1 and, for a
// long-context model, the powers of two up to 32 dividing `n` whose 2*cp chunks (the causal load
// balancing the cost model prices, and Megatron-LM and torchtitan run) divide its sequence.
std::vector<int64_t> cp_degrees(const model::ScalableModel& model, int64_t n,
                                const StrategySpec& pins) {
  if (pins.cp) return n % *pins.cp == 0 ? std::vector<int64_t>{*pins.cp} : std::vector<int64_t>{};
  std::vector<int64_t> out = {1};
  if (model.seq < kLongSequence) return out;
  for (int64_t cp = 2; cp <= 32 && n % cp == 0 && model.seq % (2 * cp) == 0; cp *= 2)
    out.push_back(cp);
  return out;
}

// Every layout of `n` devices the model and the pins allow; widest tensor parallelism first (within
// a node it is usually best for large models), so a time limit cuts off the less promising ones.
std::vector<Layout> layouts_for(const model::ScalableModel& model, int64_t n, int64_t per_node,
                                const StrategySpec& pins, bool train) {
  int64_t units = model.layers > 0 ? model.layers / std::max<int64_t>(model.unit, 1) : 0;
  std::vector<Layout> out;
  std::vector<int64_t> tps = divisors(n);
  std::reverse(tps.begin(), tps.end());
  std::vector<std::pair<int64_t, int64_t>> tp_cps;  // tensor and context parallel degrees
  for (int64_t tp : tps) {
    if (tp > per_node || (pins.tp && *pins.tp != tp)) continue;
    for (int64_t cp : cp_degrees(model, n / tp, pins)) tp_cps.push_back({tp, cp});
  }
  for (auto [tp, cp] : tp_cps) {
    for (int64_t pp : divisors(n / tp / cp)) {
      if (pins.pp && *pins.pp != pp) continue;
      // pp need not divide the layer units: the simulator's default split is as even as they
      // allow (the first chunks one more), and the split phase balances the best ones.
      if (pp > 1 && (units == 0 || units < pp)) continue;
      int64_t dp = n / tp / cp / pp;
      if (pins.dp && *pins.dp != dp) continue;
      if (model.rebuilds_batch && model.batch % dp != 0) continue;
      int64_t per_replica = model.rebuilds_batch ? model.batch / dp : 1;
      for (int64_t mb : {1, 2, 4, 8}) {
        if (pins.micro_batch && *pins.micro_batch != mb) continue;
        // Context parallelism splits each sequence: its layouts keep micro-batches of one
        // sequence (Megatron-LM's and torchtitan's long-context recipes), which also keeps the
        // number of stage costings the search needs close to what it was without cp.
        if (cp > 1 && mb != 1 && !pins.micro_batch) continue;
        if (per_replica % mb != 0 || (!model.rebuilds_batch && mb != 1)) continue;
        using pipeline::ScheduleKind;
        std::vector<pipeline::PipelineSchedule> schedules = {{ScheduleKind::k1f1b, 1}};
        if (pp > 1 && units % (2 * pp) == 0) schedules.push_back({ScheduleKind::kInterleaved, 2});
        if (pp > 1 && train) schedules.push_back({ScheduleKind::kZbH1, 1});
        if (pins.schedule) schedules = {*pins.schedule};
        for (const auto& s : schedules) out.push_back({tp, pp, dp, mb, s, cp});
      }
    }
  }
  return out;
}

struct Rung {
  int64_t zero;
  Recompute recompute;
  std::optional<Offload> offload;  ///< unset: the pins' (none by default)
};

// Per ZeRO stage, the recomputation settings from the cheapest in time; when training on a
// cluster with host memory and offload is not pinned, then the offloaded rows (ZeRO-Offload:
// ZeRO-2 with the optimizer on the host; ZeRO-Infinity: ZeRO-3 with the weights there too, and
// with NVMe, on NVMe), tried only for layouts nothing else fits.
std::vector<std::vector<Rung>> ladder_for(bool train, const StrategySpec& pins, bool host,
                                          bool nvme) {
  std::vector<int64_t> zeros = {0};
  std::vector<Recompute> recomputes = {Recompute::kNone};
  if (train)
    zeros = {0, 1, 2, 3}, recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (pins.zero) zeros = {*pins.zero};
  if (pins.recompute) recomputes = {*pins.recompute};
  std::vector<std::vector<Rung>> out;
  for (int64_t z : zeros) {
    out.emplace_back();
    for (const auto& r : recomputes) out.back().push_back({z, r, std::nullopt});
  }
  if (!train || !host || pins.offload) return out;
  for (auto [z, off] : {std::pair{int64_t{2}, Offload::kOptimizer},
                        std::pair{int64_t{3}, Offload::kOptimizerParams},
                        std::pair{int64_t{3}, Offload::kOptimizerParamsNvme}}) {
    if ((pins.zero && *pins.zero != z) || (off == Offload::kOptimizerParamsNvme && !nvme)) continue;
    out.emplace_back();
    for (const auto& r : recomputes) out.back().push_back({z, r, off});
  }
  return out;
}

double score(const ConfigResult& c, Objective o) {
  return o == Objective::kEnergy ? c.sim.energy_j : c.sim.step_time_s;
}

void sort_by(std::vector<ConfigResult>& v, Objective o) {
  std::stable_sort(v.begin(), v.end(), [o](const ConfigResult& a, const ConfigResult& b) {
    return score(a, o) < score(b, o);
  });
}

StrategySpec spec_of(const Layout& l, const Rung& r, const StrategySpec& pins) {
  StrategySpec spec;
  spec.precision = pins.precision;
  spec.attention = pins.attention;
  spec.overlap = pins.overlap;
  spec.offload = r.offload ? r.offload : pins.offload;
  const bool sp = pins.sp;
  spec.dp = l.dp;
  spec.tp = l.tp;
  if (l.cp > 1) spec.cp = l.cp;
  spec.pp = l.pp;
  spec.micro_batch = l.mb;
  spec.zero = r.zero;
  spec.recompute = r.recompute;
  spec.sp = sp;
  if (l.pp > 1) spec.schedule = l.schedule;
  return spec;
}

// Sequence parallelism for the `o.sp_layouts` best tensor-parallel layouts of `feasible` (sorted
// best first): each again with sp=on at its recomputation level and every lighter one (sp shards
// the activations outside the tensor-parallel regions, so a lighter level may now fit). Returns
// those that fit and beat their base; counts every simulation in `evaluated`.
std::vector<ConfigResult> sequence_parallel_candidates(
    const model::ScalableModel& model, const cost::Cluster& c, const ConfigSearchOptions& o,
    const std::vector<ConfigResult>& feasible, const std::shared_ptr<cost::SimulationCache>& cache,
    int64_t& evaluated, const std::function<bool()>& out_of_time) {
  std::vector<ConfigResult> out;
  for (size_t i = 0, tried = 0; i < feasible.size() && tried < static_cast<size_t>(o.sp_layouts);
       ++i) {
    const ConfigResult& base = feasible[i];
    if (base.spec.sp || base.sim.tp < 2 || base.sim.heterogeneous ||
        base.stage_planner != "tactics")
      continue;
    ++tried;
    const Recompute level = base.spec.recompute.value_or(Recompute::kNone);
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      if (r > level || out_of_time()) break;
      if (!o.train && r != Recompute::kNone) break;  // no backward: nothing to recompute
      StrategySpec spec = base.spec;
      spec.sp = true;
      spec.recompute = r;
      if (o.admits && !o.admits(spec, false)) break;  // `plan --target`: a stack without sp
      cost::SimulateOptions so;
      so.train = o.train;
      so.overlap = o.overlap;
      so.cache = cache;
      auto sim = cost::simulate(model, c, spec, so);
      ++evaluated;
      if (!sim.ok() || !sim->feasible) continue;
      ConfigResult res{spec, std::move(*sim), "tactics"};
      if (score(res, o.objective) < score(base, o.objective)) out.push_back(std::move(res));
      break;  // the lightest level that fits is the fastest
    }
  }
  return out;
}

// Mixed clusters: for the `o.submesh_layouts` best configurations of `feasible` (sorted best
// first), pipelines whose stages follow the device kinds (kind_stage_candidates()), each with its
// layers balanced by its stages' simulated speeds; per base, the best that fits and beats it.
std::vector<ConfigResult> kind_stage_results(const model::ScalableModel& model,
                                             const cost::Cluster& c, const ConfigSearchOptions& o,
                                             const std::vector<ConfigResult>& feasible,
                                             const std::shared_ptr<cost::SimulationCache>& cache,
                                             int64_t& evaluated,
                                             const std::function<bool()>& out_of_time) {
  std::vector<ConfigResult> out;
  cost::SimulateOptions so;
  so.train = o.train;
  so.overlap = o.overlap;
  so.cache = cache;
  auto simulated = [&](const StrategySpec& spec) -> std::optional<ConfigResult> {
    if (o.admits && !o.admits(spec, false)) return std::nullopt;
    auto sim = cost::simulate(model, c, spec, so);
    ++evaluated;
    if (!sim.ok()) return std::nullopt;
    return ConfigResult{spec, std::move(*sim), "tactics"};
  };
  for (size_t i = 0, tried = 0;
       i < feasible.size() && tried < static_cast<size_t>(o.submesh_layouts); ++i) {
    const ConfigResult& base = feasible[i];
    if (base.stage_planner != "tactics" || base.sim.heterogeneous) continue;
    ++tried;
    std::optional<ConfigResult> best;
    for (const auto& spec : kind_stage_candidates(model, c, base.spec, base.sim, o.train)) {
      if (out_of_time()) break;
      auto even = simulated(spec);
      if (!even) continue;
      std::optional<ConfigResult> res;
      if (even->sim.feasible) res = even;
      int64_t units = 0;
      for (int64_t n : even->sim.chunk_units) units += n;
      if (!even->sim.chunk_units.empty()) {
        auto n = balance_layers(even->sim.chunk_fixed_s, even->sim.chunk_unit_s, units);
        if (n != even->sim.chunk_units) {
          StrategySpec split = spec;
          for (int64_t k : n) split.layers.push_back(k * model.unit);
          auto balanced = simulated(split);
          if (balanced && balanced->sim.feasible &&
              (!res || score(*balanced, o.objective) < score(*res, o.objective)))
            res = std::move(balanced);
        }
      }
      if (res && (!best || score(*res, o.objective) < score(*best, o.objective)))
        best = std::move(res);
    }
    if (best && score(*best, o.objective) < score(base, o.objective))
      out.push_back(std::move(*best));
  }
  return out;
}

// The device counts to search: the cluster's, or powers of two up to the cap and the cap.
std::vector<int64_t> device_counts(const cost::Cluster& cluster, const ConfigSearchOptions& o) {
  int64_t cap = o.max_devices > 0 ? std::min(o.max_devices, cluster.count) : cluster.count;
  if (o.max_devices <= 0 && o.target_step_time_s <= 0) return {cluster.count};
  std::vector<int64_t> out;
  for (int64_t k = 1; k < cap; k *= 2) out.push_back(k);
  out.push_back(cap);
  return out;
}

}  // namespace

cost::SimulateOptions intra_op_simulate_options(const model::ScalableModel& model,
                                                const cost::Cluster& cluster, bool train,
                                                double time_limit_s, IlpStats* stats) {
  cost::SimulateOptions so;
  so.train = train;
  so.planner_key = "ilp";
  int64_t units = model.layers > 0 ? model.layers / std::max<int64_t>(model.unit, 1) : 0;
  (void)cluster;  // each stage is priced on the cluster of its own kind, given per call
  so.stage_planner = [&model, train, time_limit_s, units, stats](
                         const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                         const cost::Cluster& cluster) -> Result<Propagation> {
    auto pins = tactic_pins(g, mesh, spec);
    HEDDLE_TRY(pins);
    IntraOpOptions io;
    io.cluster = &cluster;
    io.train = train;
    // Gradients are all-reduced once per step: per micro-batch of every replica outside the mesh.
    int64_t local_batch =
        g.inputs().empty() ? 1 : std::max<int64_t>(g.type(g.inputs().front()).shape()[0], 1);
    int64_t replicas = mesh.find("dp") < 0 ? spec.dp.value_or(1) : 1;
    io.micro_batches =
        model.rebuilds_batch ? std::max<int64_t>(model.batch / (local_batch * replicas), 1) : 1;
    io.layer_scale = units >= 2 ? static_cast<double>(units) / 2 : 1;
    io.ilp.time_limit_s = std::max(time_limit_s, 1.0);
    auto p = plan_intra_op(g, mesh, *pins, CbcSolver(), io);
    HEDDLE_TRY(p);
    if (stats) {
      ++stats->solves;
      stats->variables = std::max(stats->variables, p->variables);
      stats->optimal = stats->optimal && p->optimal;
    }
    Pins all = *pins;
    for (OpId id = 0; id < g.num_ops(); ++id) all.ops[id] = p->plan.ops[static_cast<size_t>(id)];
    cost::AlphaBetaCost comm(cluster, mesh, cluster.device.element_bytes / 4.0);
    PropagateOptions popts;
    popts.cost = &comm;
    popts.seconds_per_flop = 1 / (cluster.device.peak_flops * cluster.device.gemm_efficiency);
    return propagate(g, mesh, all, popts);
  };
  return so;
}

Result<ConfigSearch> search_configs(const model::ScalableModel& model, const cost::Cluster& cluster,
                                    const ConfigSearchOptions& o) {
  if (!o.pins.meshes.empty())
    return Diagnostic(
        "meshes= is not a pin: plan chooses per-stage sub-meshes itself; pin pp=, "
        "tp= or dp=, or simulate the strategy " +
        o.pins.to_string());
  auto admitted = [&o](const StrategySpec& spec, bool intra_op_stages) {
    return !o.admits || o.admits(spec, intra_op_stages);
  };
  if (cluster.mixed() && (o.max_devices > 0 || o.target_step_time_s > 0))
    return Diagnostic(
        "--max-devices and --target-step-time take a one-kind cluster; mixed cluster " +
        cluster.name + " is planned on all of its devices");
  auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  ConfigSearch out;
  out.device_counts = device_counts(cluster, o);
  const auto ladder =
      ladder_for(o.train, o.pins, cluster.host_memory_bytes > 0, cluster.nvme_bytes > 0);
  int64_t rungs_per_layout = 0, visited = 0;
  for (const auto& z : ladder) rungs_per_layout += static_cast<int64_t>(z.size());
  std::vector<std::pair<cost::Cluster, std::vector<Layout>>> spaces;
  for (int64_t n : out.device_counts) {
    cost::Cluster c = cluster;
    c.count = n;
    auto layouts = layouts_for(model, n, cluster.devices_per_node, o.pins, o.train);
    if (layouts.empty()) continue;
    out.candidates += static_cast<int64_t>(layouts.size()) * rungs_per_layout;
    spaces.emplace_back(std::move(c), std::move(layouts));
  }
  if (spaces.empty()) {
    int64_t units = model.layers > 0 ? model.layers / std::max<int64_t>(model.unit, 1) : 0;
    return Diagnostic(fmt::format(
        "no parallel layout of {} devices fits the model and the pins {} (tp <= {} per node, pp "
        "dividing {} layers, dp dividing the batch {})",
        cluster.count, o.pins.to_string(), cluster.devices_per_node, units, model.batch));
  }
  std::optional<ConfigResult> smallest;    // least memory among the infeasible, for the message
  std::optional<std::string> first_error;  // why the first failed simulation failed
  // The time limit is checked before every simulation, and a simulation that would end past it
  // (judged by the slowest one so far) is not started: a single simulation of a large model on
  // thousands of devices takes most of a second, so checking per layout overran by many seconds.
  double slowest = 0;
  std::optional<ConfigResult> quickest;  // fastest feasible over all counts, for a missed target
  std::vector<ConfigResult> chosen;      // feasible configurations of the counts kept
  for (auto& [c, layouts] : spaces) {
    auto cache = std::make_shared<cost::SimulationCache>();
    std::vector<ConfigResult> feasible;
    // A plan that fits, found early: each layout's lightest-memory setting (the ladder's last
    // rung) in layout order until one fits (at most one simulation per layout, not cut by the
    // time limit). Used only when the time limit leaves the full pass without a feasible plan,
    // so a completed search chooses as it would without it.
    std::optional<ConfigResult> early;
    if (!ladder.empty() && !ladder.back().empty())
      for (const Layout& l : layouts) {
        if (cancel_requested()) break;
        const Rung& r = ladder.back().back();
        cost::SimulateOptions so;
        so.train = o.train;
        so.overlap = o.overlap;
        so.cache = cache;
        StrategySpec spec = spec_of(l, r, o.pins);
        if (!model.rebuilds_batch) spec.micro_batch.reset();
        if (!admitted(spec, false)) continue;
        auto sim = cost::simulate(model, c, spec, so);
        ++out.evaluated;
        if (!sim.ok()) continue;
        ConfigResult res{spec, std::move(*sim), "tactics"};
        if (res.sim.feasible) {
          early = std::move(res);
          break;
        }
        if (!smallest || res.sim.peak_memory_bytes < smallest->sim.peak_memory_bytes)
          smallest = res;
      }
    // The layouts get most of the time; the intra-op ILP keeps a share for the best of them.
    const double layouts_limit = o.intra_op ? 0.85 * o.time_limit_s : o.time_limit_s;
    auto out_of_time = [&] {
      if (cancel_requested()) return true;  // SIGINT/SIGTERM: the best so far, or nothing
      // the answer needs one simulated plan
      if (feasible.empty() && !smallest && !early) return false;
      double e = elapsed();
      return e > layouts_limit || (out.evaluated > 0 && e + slowest > layouts_limit);
    };
    for (const Layout& l : layouts) {
      if (!out.complete) break;
      // ZeRO-3 with some recomputation is never faster than ZeRO-2 with the same (it only adds
      // parameter gathers and 1.5x the gradient traffic): after ZeRO-2 fits with recomputation
      // level k, ZeRO-3 is tried only with lighter levels.
      size_t zero2_fit = SIZE_MAX;
      bool fit = false;
      for (const auto& rungs : ladder)
        for (size_t level = 0; level < rungs.size(); ++level) {
          const Rung& r = rungs[level];
          if (r.offload && fit) break;  // offloading only for what does not fit otherwise
          if (r.zero == 3 && level >= zero2_fit && !r.offload) break;
          if (out_of_time()) {
            out.complete = false;
            break;
          }
          cost::SimulateOptions so;
          so.train = o.train;
          so.overlap = o.overlap;
          so.cache = cache;
          StrategySpec spec = spec_of(l, r, o.pins);
          // A model simulated as one graph takes its whole per-replica batch as one micro-batch.
          if (!model.rebuilds_batch) spec.micro_batch.reset();
          if (!admitted(spec, false)) continue;
          auto t_sim = Clock::now();
          auto sim = cost::simulate(model, c, spec, so);
          slowest = std::max(slowest, std::chrono::duration<double>(Clock::now() - t_sim).count());
          ++out.evaluated;
          if (!sim.ok()) {
            if (!first_error)
              first_error = sim.error().message + " (strategy " + spec.to_string() + ")";
            continue;
          }
          ConfigResult res{spec, std::move(*sim), "tactics"};
          if (res.sim.feasible) {
            if (r.zero == 2 && !r.offload) zero2_fit = level;
            fit = true;
            feasible.push_back(std::move(res));
            break;  // more recomputation only adds time
          }
          if (!smallest || res.sim.peak_memory_bytes < smallest->sim.peak_memory_bytes)
            smallest = res;
        }
      visited += rungs_per_layout;
      if (o.progress) o.progress(visited, out.candidates);
    }
    if (feasible.empty() && early) feasible.push_back(*early);
    // Sequence parallelism on the best tensor-parallel layouts, unless the pins set it.
    if (!o.pins.sp && o.sp_layouts > 0 && !feasible.empty()) {
      sort_by(feasible, o.objective);
      auto sp = sequence_parallel_candidates(model, c, o, feasible, cache, out.evaluated,
                                             [&] { return elapsed() > o.time_limit_s; });
      feasible.insert(feasible.end(), sp.begin(), sp.end());
    }
    // The most promising layouts, re-planned inside each stage by the intra-op ILP.
    std::optional<cost::SimulateOptions> ilp_options;
    if (o.intra_op && !feasible.empty()) {
      sort_by(feasible, o.objective);
      auto so = intra_op_simulate_options(model, c, o.train,
                                          std::max(o.time_limit_s - elapsed(), 1.0), &out.ilp);
      so.cache = cache;
      so.overlap = o.overlap;
      ilp_options = so;
      size_t k = std::min<size_t>(feasible.size(), static_cast<size_t>(o.intra_op_layouts));
      for (size_t i = 0; i < k && elapsed() <= o.time_limit_s && !cancel_requested(); ++i) {
        const ConfigResult& base = feasible[i];
        if (base.sim.tp == 1 && !base.spec.ep) continue;  // the batch on dp: nothing to choose
        if (!admitted(base.spec, true)) continue;
        auto sim = cost::simulate(model, c, base.spec, so);
        if (!sim.ok() || !sim->feasible) continue;
        ConfigResult res{base.spec, std::move(*sim), "intra-op ILP"};
        if (score(res, o.objective) < score(base, o.objective)) feasible.push_back(std::move(res));
      }
    }
    // The most promising pipelines, their layers split unevenly where the embedding and the head
    // make the end stages slower (costed stages are cached: only the schedule is re-run).
    if (o.split_layouts > 0 && !feasible.empty()) {
      sort_by(feasible, o.objective);
      std::vector<ConfigResult> splits;
      for (size_t i = 0, tried = 0;
           i < feasible.size() && tried < static_cast<size_t>(o.split_layouts); ++i) {
        const ConfigResult& base = feasible[i];
        if (base.sim.chunk_units.size() < 2 || elapsed() > o.time_limit_s || cancel_requested())
          continue;
        ++tried;
        int64_t units = 0;
        for (int64_t n : base.sim.chunk_units) units += n;
        // Stages on different device kinds add a unit at different speeds.
        auto n = c.mixed() ? balance_layers(base.sim.chunk_fixed_s, base.sim.chunk_unit_s, units)
                           : balance_layers(base.sim.chunk_fixed_s, base.sim.unit_s, units);
        if (n == base.sim.chunk_units) continue;
        StrategySpec spec = base.spec;
        spec.layers.clear();
        for (int64_t k : n) spec.layers.push_back(k * model.unit);
        if (!admitted(spec, base.stage_planner != "tactics")) continue;
        cost::SimulateOptions so;
        so.train = o.train;
        so.overlap = o.overlap;
        so.cache = cache;
        if (base.stage_planner != "tactics") {
          if (!ilp_options) continue;
          so = *ilp_options;
        }
        auto sim = cost::simulate(model, c, spec, so);
        ++out.evaluated;
        if (!sim.ok() || !sim->feasible) continue;
        ConfigResult res{spec, std::move(*sim), base.stage_planner};
        if (score(res, o.objective) < score(base, o.objective)) splits.push_back(std::move(res));
      }
      feasible.insert(feasible.end(), splits.begin(), splits.end());
    }
    // Mixed clusters: stages that follow the kinds, each kind its own stage count, tensor
    // parallelism and batch share (in place of the inter-op DP's sub-meshes, which are not
    // kind-aware).
    if (c.mixed() && o.submesh_layouts > 0 && !feasible.empty()) {
      sort_by(feasible, o.objective);
      auto kinds = kind_stage_results(model, c, o, feasible, cache, out.evaluated,
                                      [&] { return elapsed() > o.time_limit_s; });
      feasible.insert(feasible.end(), kinds.begin(), kinds.end());
    }
    // The most promising pipelines on sub-meshes of different sizes: the inter-op DP's answer
    // for each, simulated, kept as a further candidate when faster and fitting.
    if (o.submesh_layouts > 0 && !feasible.empty() && !c.mixed()) {
      sort_by(feasible, o.objective);
      std::vector<ConfigResult> hetero;
      for (size_t i = 0, tried = 0;
           i < feasible.size() && tried < static_cast<size_t>(o.submesh_layouts); ++i) {
        const ConfigResult& base = feasible[i];
        if (base.stage_planner != "tactics" || base.sim.heterogeneous || !o.train ||
            elapsed() > o.time_limit_s || cancel_requested())
          continue;
        ++tried;
        cost::SimulateOptions so;
        so.train = o.train;
        so.overlap = o.overlap;
        so.cache = cache;
        // The base's stage count and its neighbours: a count the devices do not split into
        // equal stages may still take sub-meshes of different sizes.
        for (int64_t stages : {base.sim.pp, base.sim.pp - 1, base.sim.pp + 1}) {
          if (stages < 2 || (o.pins.pp && *o.pins.pp != stages)) continue;
          auto spec = submesh_candidate(model, c, base.spec, base.sim, so, stages);
          if (!spec || !admitted(*spec, false)) continue;
          auto sim = cost::simulate(model, c, *spec, so);
          ++out.evaluated;
          if (!sim.ok() || !sim->feasible) continue;
          ConfigResult res{*spec, std::move(*sim), base.stage_planner};
          if (score(res, o.objective) < score(base, o.objective)) hetero.push_back(std::move(res));
        }
      }
      feasible.insert(feasible.end(), hetero.begin(), hetero.end());
    }
    if (feasible.empty()) continue;
    sort_by(feasible, Objective::kTime);
    if (!quickest || feasible.front().sim.step_time_s < quickest->sim.step_time_s)
      quickest = feasible.front();
    if (o.target_step_time_s > 0) {
      std::erase_if(feasible, [&](const ConfigResult& r) {
        return r.sim.step_time_s > o.target_step_time_s;
      });
      if (feasible.empty()) continue;
      chosen = std::move(feasible);
      break;  // the smallest count reaching the target
    }
    chosen.insert(chosen.end(), feasible.begin(), feasible.end());
  }
  out.search_time_s = elapsed();
  if (chosen.empty()) {
    if (o.target_step_time_s > 0 && quickest)
      return Diagnostic(fmt::format(
          "no plan reaches a step time of {:.4g} s on up to {} devices; the fastest found takes "
          "{:.4g} s (strategy {}, {} devices)",
          o.target_step_time_s, out.device_counts.back(), quickest->sim.step_time_s,
          quickest->sim.strategy, quickest->sim.devices));
    if (!smallest)
      return Diagnostic("no configuration could be simulated for this model on " + cluster.name +
                        (first_error ? ": " + *first_error : std::string()));
    if (!out.complete)
      return Diagnostic("the time limit ran out after " + std::to_string(out.evaluated) + " of " +
                        std::to_string(out.candidates) +
                        " configurations, none of which fits; the smallest so far needs " +
                        human_bytes(smallest->sim.peak_memory_bytes) + " per device of " +
                        human_bytes(smallest->sim.memory_limit_bytes) + "; raise --time-limit");
    const auto& sm = smallest->sim;
    const bool host = sm.peak_memory_bytes <= sm.memory_limit_bytes;  // the host overflowed
    return Diagnostic(
        host ? "no plan fits: the smallest found (strategy " + sm.strategy + ") needs " +
                   human_bytes(sm.peak_memory_bytes) + " per device but its offloaded state " +
                   human_bytes(sm.host_memory_bytes) + " of host memory per device, and the " +
                   "cluster gives " + human_bytes(sm.host_memory_limit_bytes) +
                   "; use more devices or describe more host memory (a cluster file)"
             : "no plan fits in " + human_bytes(sm.memory_limit_bytes) +
                   " per device; the smallest found needs " + human_bytes(sm.peak_memory_bytes) +
                   " (strategy " + sm.strategy + ")" +
                   (out.complete ? "" : "; the time limit stopped the search first"));
  }
  sort_by(chosen, Objective::kEnergy);
  out.greenest = chosen.front();
  sort_by(chosen, Objective::kTime);
  out.fastest = chosen.front();
  sort_by(chosen, o.objective);
  out.best = chosen.front();
  for (size_t k = 0; k < chosen.size() && k < 10; ++k) out.ranking.push_back(chosen[k]);
  return out;
}

}  // namespace heddle::search
