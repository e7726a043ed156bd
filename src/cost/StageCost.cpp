#include "StageCost.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "heddle/cost/ModelFlops.h"
#include "heddle/ops/OpCost.h"
#include "heddle/sharding/Tactics.h"

namespace heddle::cost {

// Costs the stage of shape `shape` holding `mb` sequences per replica: its two-layer graph
// sharded on its mesh (without dp when data parallelism only splits the batch), cached.
Result<CostedStage> cost_stage(const model::ScalableModel& model, const Cluster& cluster,
                               const StrategySpec& spec, const SimulateOptions& options,
                               const StrategySpec::StageMesh& shape, int64_t mb, bool layered,
                               std::map<std::string, SimulationCache::Stage>& local) {
  const int64_t ep = spec.ep.value_or(1), cp = spec.cp.value_or(1), zero = spec.zero.value_or(0);
  StrategySpec inner = spec;
  inner.pp.reset();
  if (!spec.meshes.empty()) {
    inner.meshes.clear();
    inner.dp = shape.dp;
    inner.tp = shape.tp;
  }
  auto mesh = inner.mesh(shape.dp * cp * shape.tp * ep);
  HEDDLE_TRY(mesh);
  // Data parallelism only splits the batch (unless ZeRO-3 shards parameters over it or experts
  // share the axis): the representative device's stage costs the same on the mesh without dp,
  // holding its own slice of the batch, so every dp degree shares one costing.
  const bool dp_free = shape.dp > 1 && zero < 3 && ep == 1 && model.rebuilds_batch;
  StrategySpec cost_spec = inner;
  if (dp_free) cost_spec.dp.reset();
  auto cost_mesh = cost_spec.mesh(dp_free ? cp * shape.tp : shape.dp * cp * shape.tp * ep);
  HEDDLE_TRY(cost_mesh);
  const int64_t cost_batch = dp_free ? mb : mb * shape.dp;
  Cluster keyed = cluster;  // a stage's costing does not depend on how many stages there are
  keyed.count = 0;
  std::string key =
      fmt::format("{}|{}|{}|{}|{}|{}|{}", model.name, keyed.hash(), cost_mesh->to_string(),
                  cost_batch, zero >= 3, spec.sp, options.planner_key);
  auto& store = options.cache ? options.cache->stages : local;
  auto it = store.find(key);
  if (it == store.end()) {
    SimulationCache::Stage fresh;
    auto g2 = model.build(layered ? 2 * model.unit : 0, cost_batch);
    HEDDLE_TRY(g2);
    std::optional<Graph> g1;
    if (layered) {
      auto one = model.build(model.unit, cost_batch);
      HEDDLE_TRY(one);
      g1 = std::move(*one);
    }
    auto prop = options.stage_planner ? options.stage_planner(*g2, *cost_mesh, inner, cluster)
                                      : stage_plan(*g2, *cost_mesh, cluster, inner);
    HEDDLE_TRY(prop);
    auto parts = cost_model_parts(*g2, *cost_mesh, *prop, cluster, g1 ? &*g1 : nullptr);
    HEDDLE_TRY(parts);
    fresh.parts = std::move(*parts);
    fresh.flops2 = graph_flops(*g2);
    fresh.flops1 = g1 ? graph_flops(*g1) : 0;
    fresh.causal_skipped2 = causal_skipped_flops(*g2);
    fresh.causal_skipped1 = g1 ? causal_skipped_flops(*g1) : 0;
    it = store.emplace(key, std::move(fresh)).first;
  }
  return CostedStage{shape.dp, shape.tp, std::move(*mesh), dp_free, &it->second};
}

// What the executor's loads and gathers cost on the whole stage mesh (dp included), as
// `heddle run` lowers, for a forward step of `units` layer units.
Result<PartCost> executor_io_cost(const model::ScalableModel& model, const Cluster& cluster,
                                  const StrategySpec& spec, const Mesh& mesh, int64_t batch,
                                  bool layered, int64_t units) {
  auto g2 = model.build(layered ? 2 * model.unit : 0, batch);
  HEDDLE_TRY(g2);
  auto prop = stage_plan(*g2, mesh, cluster, spec);
  HEDDLE_TRY(prop);
  auto out = cost_executor_io(*g2, mesh, *prop, cluster);
  HEDDLE_TRY(out);
  PartCost io = *out;
  if (layered && units > 2) {  // the two-unit graph's loads, plus the other units'
    auto g1 = model.build(model.unit, batch);
    HEDDLE_TRY(g1);
    auto prop1 = stage_plan(*g1, mesh, cluster, spec);
    HEDDLE_TRY(prop1);
    auto out1 = cost_executor_io(*g1, mesh, *prop1, cluster);
    HEDDLE_TRY(out1);
    io.compute_s += static_cast<double>(units - 2) * std::max(io.compute_s - out1->compute_s, 0.0);
  }
  return io;
}

}  // namespace heddle::cost
