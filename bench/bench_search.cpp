// Planner benchmark: for each case, the auto plan's predicted step time against the best of
// plain data parallelism, the ZeRO stages, and a grid of Megatron layouts (t, p, d, micro-batch,
// schedule, with Megatron's distributed optimizer or not and every recomputation) that fit in
// memory, each simulated once in this run; then the search time of gpt3-175b on a100x1024 and how
// it grows with devices and layers. Prints markdown tables.
//
// Usage: bench_search [--quick]   (--quick: the first two cases and no scaling tables)
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "heddle/search/ConfigSearch.h"
#include "heddle/search/IntraOp.h"
#include "heddle/sharding/Tactics.h"

using namespace heddle;

namespace {

struct Case {
  std::string label, model, cluster;
  zoo::ZooOverrides over;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Best {
  double step = std::numeric_limits<double>::infinity();
  std::string strategy = "-";
  int64_t tried = 0;
  void offer(const cost::SimulationResult& r) {
    ++tried;
    if (r.feasible && r.step_time_s < step) step = r.step_time_s, strategy = r.strategy;
  }
};

// Every baseline configuration of one family, simulated with the tactics' stage plans.
void baselines(const model::ScalableModel& m, const cost::Cluster& c, Best& dp, Best& zero,
               Best& megatron) {
  int64_t n = c.count;
  int64_t units = m.layers > 0 ? m.layers / m.unit : 0;
  auto cache = std::make_shared<cost::SimulationCache>();
  auto sim = [&](StrategySpec s, Best& into) {
    cost::SimulateOptions so;
    so.train = true;
    so.cache = cache;
    auto r = cost::simulate(m, c, s, so);
    if (r.ok()) into.offer(*r);
  };
  for (int64_t mb : {1, 2, 4, 8})
    for (const char* rc : {"none", "selective", "full"})
      for (int64_t z : {0, 1, 2, 3}) {
        StrategySpec s;
        s.dp = n, s.micro_batch = mb, s.zero = z, s.recompute = *parse_recompute(rc);
        if (m.batch % n != 0 || (m.batch / n) % mb != 0) continue;
        sim(s, z == 0 ? dp : zero);
      }
  for (int64_t t = 1; t <= std::min(n, c.devices_per_node); ++t) {
    if (n % t != 0) continue;
    for (int64_t p = 1; p <= n / t; ++p) {
      if ((n / t) % p != 0 || (p > 1 && (units == 0 || units % p != 0))) continue;
      int64_t d = n / t / p;
      if (m.batch % d != 0) continue;
      for (int64_t mb : {1, 2, 4, 8}) {
        if ((m.batch / d) % mb != 0) continue;
        for (const char* sched : {"1f1b", "interleaved:2"}) {
          if (p == 1 && std::string(sched) != "1f1b") continue;
          if (p > 1 && std::string(sched) != "1f1b" && units % (2 * p) != 0) continue;
          for (int64_t z : {0, 1})
            for (const char* rc : {"none", "selective", "full"}) {
              StrategySpec s;
              s.dp = d, s.tp = t, s.pp = p, s.micro_batch = mb, s.zero = z,
              s.recompute = *parse_recompute(rc);
              if (p > 1) s.schedule = *pipeline::PipelineSchedule::parse(sched);
              sim(s, megatron);
            }
        }
      }
    }
  }
}

zoo::ZooOverrides batch(int64_t b) {
  zoo::ZooOverrides o;
  o.batch = b;
  return o;
}

// gpt3-1.3b cut to 8 layers with a 250k vocabulary (its head costs several layers), batch 16:
// on 6 devices no dp=3 divides the batch, so equal stages cannot use them all in two stages.
zoo::ZooOverrides heavy_head() {
  zoo::ZooOverrides o = batch(16);
  o.layers = 8;
  o.vocab = 250000;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  auto run_start = std::chrono::steady_clock::now();
  std::vector<Case> cases = {
      {"Alpa GPT-3 1.3B", "gpt3-1.3b", "v100x4", batch(1024)},
      {"Alpa GPT-3 2.6B", "gpt3-2.6b", "v100x8", batch(1024)},
      {"Alpa GPT-3 6.7B", "gpt3-6.7b", "v100x16", batch(1024)},
      {"Alpa GPT-3 15B", "gpt3-15b", "v100x32", batch(1024)},
      {"Alpa GPT-3 39B", "gpt3-39b", "v100x64", batch(1024)},
      {"Megatron 1.7B", "megatron-1.7b", "a100x32", batch(512)},
      {"Megatron 3.6B", "megatron-3.6b", "a100x64", batch(512)},
      {"Megatron 7.5B", "megatron-7.5b", "a100x128", batch(512)},
      {"Megatron 18.4B", "megatron-18.4b", "a100x256", batch(1024)},
      {"Megatron 39.1B", "megatron-39.1b", "a100x512", batch(1536)},
      {"Llama 2 70B", "llama2-70b", "h100x64", batch(512)},
      {"GShard MoE", "gshard-moe", "a100x32", batch(256)},
      {"Wide ResNet-50-2", "wide-resnet50-2", "v100x16", batch(1536)},
      {"Heavy-head GPT, 6 devices", "gpt3-1.3b", "v100x6", heavy_head()},
  };
  if (quick) cases.resize(2);
  // `--only TEXT`: the baselines rows whose label contains TEXT, nothing else.
  const bool only = argc > 2 && std::strcmp(argv[1], "--only") == 0;
  if (only)
    std::erase_if(cases, [&](const Case& c) { return c.label.find(argv[2]) == std::string::npos; });
  fmt::print(
      "| case | model | cluster | auto plan | auto step (s) | search (s) | best DP (s) | best ZeRO "
      "(s) | best Megatron grid (s) | best baseline | auto / best |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
  double worst_ratio = 0;
  std::vector<std::string> notes;
  for (const auto& c : cases) {
    auto model = heddle::model::zoo_scalable_model(c.model, c.over);
    auto cluster = cost::resolve_cluster(c.cluster);
    if (!model.ok() || !cluster.ok()) {
      fmt::print("| {} | error: {} |\n", c.label,
                 model.ok() ? cluster.error().message : model.error().message);
      continue;
    }
    search::ConfigSearchOptions o;
    o.train = true;
    auto t0 = std::chrono::steady_clock::now();
    auto found = search::search_configs(*model, *cluster, o);
    double secs = seconds_since(t0);
    Best dp, zero, megatron;
    baselines(*model, *cluster, dp, zero, megatron);
    Best best = dp;
    for (const Best* b : {&zero, &megatron})
      if (b->step < best.step) best = *b;
    auto fmt_step = [](const Best& b) {
      return std::isfinite(b.step) ? fmt::format("{:.4g}", b.step) : std::string("no fit");
    };
    if (!found.ok()) {
      fmt::print("| {} | {} | {} | {} | - | {:.2f} | {} | {} | {} | {} | - |\n", c.label, c.model,
                 c.cluster, found.error().message, secs, fmt_step(dp), fmt_step(zero),
                 fmt_step(megatron), best.strategy);
      continue;
    }
    const auto& r = found->best;
    // No baseline fits: no ratio (the row does not count towards the worst).
    std::string ratio = "-";
    if (std::isfinite(best.step)) {
      worst_ratio = std::max(worst_ratio, r.sim.step_time_s / best.step);
      ratio = fmt::format("{:.3f}", r.sim.step_time_s / best.step);
    }
    fmt::print("| {} | {} | {} | `{}`{} | {:.4g} | {:.2f} | {} | {} | {} | `{}` | {} |\n", c.label,
               c.model, c.cluster, r.sim.strategy,
               r.stage_planner == "tactics" ? "" : " (ILP stages)", r.sim.step_time_s, secs,
               fmt_step(dp), fmt_step(zero), fmt_step(megatron), best.strategy, ratio);
    if (r.sim.heterogeneous) {  // what the same search finds with equal sub-meshes only
      search::ConfigSearchOptions equal = o;
      equal.submesh_layouts = 0;
      if (auto e = search::search_configs(*model, *cluster, equal); e.ok())
        notes.push_back(
            fmt::format("{}: with equal sub-meshes only, the search's best is `{}`, "
                        "{:.4g} s (auto / that: {:.3f})",
                        c.label, e->best.sim.strategy, e->best.sim.step_time_s,
                        r.sim.step_time_s / e->best.sim.step_time_s));
    }
    std::fflush(stdout);
  }
  fmt::print("\nworst auto / best baseline: {:.3f}\n", worst_ratio);
  for (const auto& n : notes) fmt::print("{}\n", n);
  if (quick || only) return 0;

  // The intra-op ILP's size: gpt3-175b training on a dp=2,tp=8 stage (64 micro-batches per
  // gradient all-reduce), whole graphs of L layers, exact (every op chooses) against merged and
  // folded.
  fmt::print(
      "\n| graph | ops | form | ILP nodes | ILP variables | build + solve (s) | estimate (s) |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  auto a100 = *cost::cluster_preset("a100x16");
  for (int64_t layers : {2, 4, 8, 96}) {
    zoo::ZooOverrides over = batch(2);
    over.layers = layers;
    auto g = zoo::build_zoo_model("gpt3-175b", over);
    auto spec = *StrategySpec::parse("dp=2,tp=8");
    Mesh mesh = *spec.mesh(16);
    auto pins = tactic_pins(*g, mesh, spec);
    for (bool reduce : {false, true}) {
      if (!reduce && layers > 8) continue;
      search::IntraOpOptions io;
      io.cluster = &a100;
      io.train = true;
      io.micro_batches = 64;
      io.merge_followers = io.fold_layers = reduce;
      auto t0 = std::chrono::steady_clock::now();
      auto p = search::plan_intra_op(*g, mesh, *pins, search::CbcSolver(), io);
      double secs = seconds_since(t0);
      if (!p.ok()) {
        fmt::print("| gpt3-175b, {} layers | {} | {} | error: {} |\n", layers, g->num_ops(),
                   reduce ? "merged + folded" : "exact", p.error().message);
        continue;
      }
      fmt::print("| gpt3-175b, {} layers | {} | {} | {} | {} | {:.2f} | {:.6g} |\n", layers,
                 g->num_ops(), reduce ? "merged + folded" : "exact", p->nodes, p->variables, secs,
                 p->seconds);
      std::fflush(stdout);
    }
  }

  // Search time: gpt3-175b training on 8 to 4096 A100s, then with 24 to 192 layers on 1024.
  fmt::print(
      "\n| model | cluster | layers | configurations | ILPs | search (s) | plan | step (s) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  auto row = [](const std::string& cluster_name, std::optional<int64_t> layers) {
    zoo::ZooOverrides over = batch(1536);
    over.layers = layers;
    auto model = heddle::model::zoo_scalable_model("gpt3-175b", over);
    auto cluster = cost::resolve_cluster(cluster_name);
    search::ConfigSearchOptions o;
    o.train = true;
    auto t0 = std::chrono::steady_clock::now();
    auto found = search::search_configs(*model, *cluster, o);
    double secs = seconds_since(t0);
    if (!found.ok()) {
      fmt::print("| gpt3-175b | {} | {} | - | - | {:.2f} | {} | - |\n", cluster_name, model->layers,
                 secs, found.error().message);
    } else {
      fmt::print("| gpt3-175b | {} | {} | {} | {} | {:.2f} | `{}` | {:.4g} |\n", cluster_name,
                 model->layers, found->evaluated, found->ilp.solves, secs, found->best.sim.strategy,
                 found->best.sim.step_time_s);
    }
    std::fflush(stdout);
  };
  for (int64_t n : {8, 64, 256, 1024, 4096}) row(fmt::format("a100x{}", n), std::nullopt);
  for (int64_t l : {24, 48, 192}) row("a100x1024", l);
  fmt::print("\nwhole run: {:.1f} s\n", seconds_since(run_start));
  return 0;
}
