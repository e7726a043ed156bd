// The split reports of a plan's stages: the search's simulation replayed with a stage planner
// that keeps each stage's graph, mesh and plan.
#include "heddle/search/PlanSplit.h"

#include "heddle/sharding/Tactics.h"

namespace heddle::search {

Result<std::vector<StageSplit>> plan_stage_splits(const model::ScalableModel& src,
                                                  const cost::Cluster& cluster,
                                                  const ConfigResult& best, bool train,
                                                  double time_limit_s) {
  cost::Cluster used = cluster;
  used.count = best.sim.devices;
  cost::SimulateOptions so;
  if (best.stage_planner != "tactics")  // the plan that won: the ILP's stages
    so = intra_op_simulate_options(src, used, train, time_limit_s, nullptr);
  so.train = train;
  std::vector<StageSplit> out;
  auto planner = so.stage_planner;
  so.stage_planner = [&](const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                         const cost::Cluster& kind) -> Result<Propagation> {
    auto prop = planner ? planner(g, mesh, spec, kind) : cost::stage_plan(g, mesh, kind, spec);
    HEDDLE_TRY(prop);
    StrategySpec inner = spec;
    inner.pp.reset();
    auto pins = tactic_pins(g, mesh, inner);
    HEDDLE_TRY(pins);
    out.push_back({g, mesh, split_report(g, *pins, prop->plan)});
    return prop;
  };
  auto sim = cost::simulate(src, used, best.spec, so);
  HEDDLE_TRY(sim);
  return out;
}

std::string stage_splits_text(const std::vector<StageSplit>& splits, size_t limit) {
  std::string text;
  for (const StageSplit& s : splits)
    if (std::string r = s.report.to_string(s.graph, s.mesh, limit); !r.empty())
      text += "stage mesh " + s.mesh.to_string() + ":\n" + r;
  std::string out;  // continuation lines under the value column of plan's text
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += "           ";
  }
  return out;
}

nlohmann::json stage_splits_json(const std::vector<StageSplit>& splits) {
  nlohmann::json out = nlohmann::json::array();
  for (const StageSplit& s : splits) {
    const Graph& g = s.graph;
    nlohmann::json idle = nlohmann::json::array();
    for (int64_t a : s.report.idle_axes) idle.push_back(s.mesh.axis(a).name);
    nlohmann::json ops = nlohmann::json::array();
    for (const UnsplitOp& u : s.report.unsplit) {
      const Op& op = g.op(u.op);
      nlohmann::json dims = nlohmann::json::array();
      for (const DimVerdict& d : u.dims)
        dims.push_back({{"dim", op.space.dim(d.dim).name},
                        {"reason", no_split_name(d.reason)},
                        {"detail", d.detail}});
      ops.push_back({{"op", op_kind_name(op.kind)},
                     {"result", g.value(op.results[0].value).name},
                     {"axis", s.mesh.axis(u.axis).name},
                     {"dims", dims}});
    }
    out.push_back({{"mesh", s.mesh.to_string()}, {"idle_axes", idle}, {"unsplit_ops", ops}});
  }
  return out;
}

}  // namespace heddle::search
