// One pipeline stage costed on its own sub-mesh (private to the simulator): its two-layer graph
// sharded and priced (cached per shape), and what the executor's loads and gathers cost.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/ModelParts.h"
#include "heddle/cost/Simulator.h"
#include "heddle/model/ScalableModel.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle::cost {

/// One pipeline stage costed on its own sub-mesh.
struct CostedStage {
  int64_t dp = 1, tp = 1;
  Mesh mesh;             ///< the stage's dp x ep x tp mesh
  bool dp_free = false;  ///< costed without its dp axis, one replica's batch
  const SimulationCache::Stage* stage = nullptr;
};

/// Costs the stage of shape `shape` holding `mb` sequences per replica: its two-layer graph
/// sharded on its mesh (without dp when data parallelism only splits the batch), cached in
/// `options.cache` or else `local`.
Result<CostedStage> cost_stage(const model::ScalableModel& model, const Cluster& cluster,
                               const StrategySpec& spec, const SimulateOptions& options,
                               const StrategySpec::StageMesh& shape, int64_t mb, bool layered,
                               std::map<std::string, SimulationCache::Stage>& local);

/// What the executor's loads and gathers cost on the whole stage mesh (dp included), as
/// `heddle run` lowers, for a forward step of `units` layer units.
Result<PartCost> executor_io_cost(const model::ScalableModel& model, const Cluster& cluster,
                                  const StrategySpec& spec, const Mesh& mesh, int64_t batch,
                                  bool layered, int64_t units);

}  // namespace heddle::cost
