#include "heddle/search/SubMeshes.h"

#include <algorithm>
#include <map>

#include "heddle/search/InterOp.h"

namespace heddle::search {

std::optional<StrategySpec> submesh_candidate(const model::ScalableModel& model,
                                              const cost::Cluster& cluster,
                                              const StrategySpec& base,
                                              const cost::SimulationResult& base_sim,
                                              const cost::SimulateOptions& options, int64_t stages,
                                              const SubMeshOptions& sub) {
  const int64_t pp = stages, tp = base_sim.tp, m = base_sim.micro_batches;
  const pipeline::PipelineSchedule schedule =
      base_sim.pp > 1 ? base_sim.schedule
                      : pipeline::PipelineSchedule{pipeline::ScheduleKind::kZbH1};
  if (pp < 2 || base_sim.heterogeneous || base.ep.value_or(1) != 1 || !model.rebuilds_batch ||
      model.layers < 2 * model.unit ||
      (schedule.kind != pipeline::ScheduleKind::k1f1b &&
       schedule.kind != pipeline::ScheduleKind::kZbH1))
    return std::nullopt;
  const int64_t units = model.layers / model.unit;
  const int64_t replicas = cluster.count / tp;  // sum over stages of dp_s
  const int64_t rows = model.batch / m;         // sequences per micro-batch, split over each dp_s
  if (units < pp || cluster.count % tp != 0 || model.batch % m != 0) return std::nullopt;
  // The device granule: q replicas of tp devices.
  const int64_t most = std::max(sub.granule_factor * pp, pp + 2);
  int64_t q = 1;
  while (replicas / q > most || replicas % q != 0) {
    ++q;
    if (q > replicas) return std::nullopt;
  }
  const int64_t granules = replicas / q;
  if (granules < pp) return std::nullopt;
  // Stage shapes: k granules, at most twice an even share, dividing the micro-batch; each priced
  // by the homogeneous pipeline with that many replicas per stage.
  const int64_t share = (granules + pp - 1) / pp;
  std::vector<int64_t> sizes;
  std::map<int64_t, cost::SimulationResult> priced;
  for (int64_t k = 1; k <= std::min(granules - pp + 1, 2 * share); ++k) {
    const int64_t dp = k * q;
    if (rows % dp != 0) continue;
    StrategySpec s = base;
    s.meshes.clear();
    s.layers.clear();
    s.dp = dp;
    s.tp = tp;
    s.pp = pp;
    s.micro_batch = rows / dp;
    s.microbatches.reset();
    s.schedule = schedule;
    cost::Cluster c = cluster;
    c.count = dp * tp * pp;
    auto sim = cost::simulate(model, c, s, options);
    if (!sim.ok() || sim->chunk_fixed_s.size() != static_cast<size_t>(pp)) continue;
    sizes.push_back(k);
    priced.emplace(k, std::move(*sim));
  }
  if (sizes.size() < 2) return std::nullopt;
  // Layer clusters: runs of consecutive units, as even as they divide.
  const int64_t L = std::min(units, std::max<int64_t>(sub.max_clusters, pp));
  std::vector<int64_t> start(static_cast<size_t>(L) + 1);
  for (int64_t i = 0; i <= L; ++i) start[static_cast<size_t>(i)] = i * units / L;
  InterOpProblem p;
  p.layers = L;
  p.devices = granules;
  p.submesh_sizes = sizes;
  p.micro_batches = {m};
  p.schedules = {schedule};
  p.memory_limit = cluster.device.memory_bytes;
  p.pinned_stages = pp;
  p.cost = [&](int64_t first, int64_t last, int64_t k, int64_t) {
    StageCost sc;
    auto it = priced.find(k);
    if (it == priced.end()) {
      sc.feasible = false;
      return sc;
    }
    const auto& r = it->second;
    // The chunk position's fixed cost: embedding first, head last, sends in between.
    size_t pos = first == 0 ? 0 : last == L ? r.chunk_fixed_s.size() - 1 : 1;
    if (first == 0 && last == L) {
      sc.feasible = false;  // pp >= 2: a stage never holds every layer
      return sc;
    }
    const double n =
        static_cast<double>(start[static_cast<size_t>(last)] - start[static_cast<size_t>(first)]);
    sc.seconds = r.chunk_fixed_s[pos] + n * r.chunk_unit_s[pos];
    // Memory, scaled from the priced pipeline's stage at this position by the units held: its
    // states, and its activations per micro-batch in flight.
    const cost::StageResult& st = r.stages[pos];
    const double scale = n / static_cast<double>(std::max<int64_t>(r.chunk_units[pos], 1));
    sc.state_bytes = st.state_bytes * scale;
    sc.activation_bytes =
        st.activation_bytes * scale / in_flight(pp - static_cast<int64_t>(pos), m, schedule);
    return sc;
  };
  auto plan = solve_inter_op(p);
  if (!plan.ok() || static_cast<int64_t>(plan->stages.size()) != pp) return std::nullopt;
  StrategySpec out = base;
  out.dp.reset();
  out.tp.reset();
  out.micro_batch.reset();
  out.layers.clear();
  out.meshes.clear();
  out.pp = pp;
  out.microbatches = m;
  out.schedule = schedule;
  for (const auto& st : plan->stages) {
    out.meshes.push_back({st.devices * q, tp});
    out.layers.push_back(
        (start[static_cast<size_t>(st.last)] - start[static_cast<size_t>(st.first)]) * model.unit);
  }
  return out;
}

}  // namespace heddle::search
