#include "heddle/search/KindStages.h"

namespace heddle::search {

namespace {

struct KindShape {
  int64_t stages, dp, tp;
};

// Kind `k`'s shapes: s equal stages of dp x tp, dp dividing `rows` sequences per micro-batch.
std::vector<KindShape> shapes_of(const cost::Cluster& k, int64_t rows) {
  std::vector<KindShape> out;
  for (int64_t s = 1; s <= k.count; ++s) {
    if (k.count % s != 0) continue;
    const int64_t per_stage = k.count / s;
    for (int64_t tp = 1; tp <= std::min(per_stage, k.devices_per_node); ++tp)
      if (per_stage % tp == 0 && rows % (per_stage / tp) == 0)
        out.push_back({s, per_stage / tp, tp});
  }
  return out;
}

}  // namespace

std::vector<StrategySpec> kind_stage_candidates(const model::ScalableModel& model,
                                                const cost::Cluster& cluster,
                                                const StrategySpec& base,
                                                const cost::SimulationResult& base_sim, bool train,
                                                const KindStageOptions& options) {
  std::vector<StrategySpec> out;
  const int64_t m = base_sim.micro_batches;
  if (!cluster.mixed() || base.ep.value_or(1) != 1 || !model.rebuilds_batch ||
      model.layers < 2 * model.unit || model.unit < 1 || m < 1 || model.batch % m != 0)
    return out;
  const int64_t units = model.layers / model.unit, rows = model.batch / m;
  std::vector<std::vector<KindShape>> per_kind;
  for (const auto& k : cluster.kinds) {
    per_kind.push_back(shapes_of(k, rows));
    if (per_kind.back().empty()) return out;
  }
  // Every combination, odometer order (the first kind's choice fastest).
  std::vector<size_t> pick(per_kind.size(), 0);
  while (static_cast<int64_t>(out.size()) < options.max_candidates) {
    StrategySpec s = base;
    s.dp.reset();
    s.tp.reset();
    s.micro_batch.reset();
    s.layers.clear();
    s.meshes.clear();
    for (size_t k = 0; k < per_kind.size(); ++k) {
      const KindShape& ks = per_kind[k][pick[k]];
      for (int64_t i = 0; i < ks.stages; ++i) s.meshes.push_back({ks.dp, ks.tp});
    }
    const int64_t pp = static_cast<int64_t>(s.meshes.size());
    if (pp <= units) {
      s.pp = pp;
      s.microbatches = m;
      s.schedule = pipeline::PipelineSchedule{train ? pipeline::ScheduleKind::kZbH1
                                                    : pipeline::ScheduleKind::k1f1b};
      out.push_back(std::move(s));
    }
    size_t k = 0;
    while (k < pick.size() && ++pick[k] == per_kind[k].size()) pick[k++] = 0;
    if (k == pick.size()) break;
  }
  return out;
}

}  // namespace heddle::search
