// The simulate request (heddle/driver/SimulateModel.h).
#include "heddle/driver/SimulateModel.h"

#include "heddle/search/ConfigSearch.h"
#include "heddle/support/ByteSize.h"

namespace heddle::driver {

Result<cost::Cluster> resolve_cluster(const std::string& spec, const std::string& memory) {
  auto cluster = cost::resolve_cluster(spec);
  HEDDLE_TRY(cluster);
  if (!memory.empty()) {
    auto m = parse_bytes(memory);
    HEDDLE_TRY(m);
    cluster->for_each_device([&](cost::DeviceProfile& d) { d.memory_bytes = *m; });
  }
  return cluster;
}

Result<SimulatedModel> simulate_model(const SimulateModelRequest& r, const cost::Cluster& cluster) {
  auto spec = StrategySpec::parse(r.strategy);
  HEDDLE_TRY(spec);
  model::ModelRequest mr = r.model;
  mr.options = {};
  auto src = model::load_scalable_model(mr);
  HEDDLE_TRY(src);
  SimulatedModel out{.model = std::move(*src), .result = {}};
  cost::SimulateOptions opts;
  if (r.stage_planner == "ilp")  // the stages `heddle plan` re-planned with the intra-op ILP
    opts = search::intra_op_simulate_options(out.model, cluster, r.train, 60, nullptr);
  else if (r.stage_planner != "tactics")
    return Diagnostic("--stage-planner '" + r.stage_planner +
                      "' is not a stage planner; use tactics or ilp");
  opts.train = r.train;
  opts.overlap = r.overlap;
  opts.trace = r.trace;
  opts.autodiff = r.executor;
  opts.executor_io = r.executor;
  auto sim = cost::simulate(out.model, cluster, *spec, opts);
  HEDDLE_TRY(sim);
  out.result = std::move(*sim);
  return out;
}

}  // namespace heddle::driver
