// The intra-op plan of one pipeline stage: propagation from the strategy's presets, priced with
// the cluster's links and the device's GEMM rate (the simulator's default stage planner).
#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/Simulator.h"
#include "heddle/sharding/Tactics.h"

namespace heddle::cost {

Result<Propagation> stage_plan(const Graph& g, const Mesh& mesh, const Cluster& cluster,
                               const StrategySpec& spec) {
  StrategySpec inner = spec;
  inner.pp.reset();
  // The graph is float32; the device moves its own element size.
  AlphaBetaCost comm(cluster, mesh, cluster.device.element_bytes / 4.0);
  PropagateOptions popts;
  popts.cost = &comm;
  popts.seconds_per_flop = 1 / (cluster.device.peak_flops * cluster.device.gemm_efficiency);
  return plan_from_strategy(g, mesh, inner, popts);
}

}  // namespace heddle::cost
