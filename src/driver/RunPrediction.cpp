// The cost model's memory figure for a run (heddle/driver/RunPrediction.h).
#include "heddle/driver/RunPrediction.h"

#include "heddle/cost/Cluster.h"
#include "heddle/driver/SimulateModel.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle::driver {

Result<std::vector<double>> predicted_peak_bytes(const RunRequest& r, const std::string& strategy,
                                                 int64_t devices) {
  if (auto spec = StrategySpec::parse(strategy); spec.ok() && spec->auto_search)
    return Diagnostic(
        "the plan shards op by op (`auto`), and the cost model prices dp/tp/pp degrees");
  auto cluster = cost::resolve_cluster("cpu");
  HEDDLE_TRY(cluster);
  cluster->count = devices;
  cluster->devices_per_node = devices;
  SimulateModelRequest q;
  q.model = r.model;
  q.strategy = strategy;
  q.train = r.train;
  q.executor = true;
  auto sim = simulate_model(q, *cluster);
  HEDDLE_TRY(sim);
  std::vector<double> out;
  for (const cost::StageResult& st : sim->result().stages)
    out.insert(out.end(), static_cast<size_t>(st.devices), st.peak_memory_bytes);
  if (static_cast<int64_t>(out.size()) != devices)
    return Diagnostic("the simulated stages hold " + std::to_string(out.size()) +
                      " devices, the run " + std::to_string(devices));
  return out;
}

}  // namespace heddle::driver
