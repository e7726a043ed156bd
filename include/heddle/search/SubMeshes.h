// Pipelines whose stages run on sub-meshes of different sizes: Alpa's inter-op DP
// (solve_inter_op) priced from the simulator's own per-chunk costs, turned into a `meshes=`
// strategy that the configuration search simulates and keeps when it is faster.
#pragma once

#include <optional>

#include "heddle/cost/Simulator.h"

namespace heddle::search {

/// Options of submesh_candidate().
struct SubMeshOptions {
  /// At most this many layer clusters (groups of consecutive layer units) in the DP; default 16.
  int64_t max_clusters = 16;
  /// The DP's device granule is the smallest divisor q of (devices / tp) giving at most
  /// max(granule_factor x pp, pp + 2) granules; default 2.
  int64_t granule_factor = 2;
};

/// The DP's answer for `base` (a simulated homogeneous configuration: schedule 1f1b or zb-h1 (or
/// none, pp = 1), no ep, a model with layers that rebuilds its batch) on `stages` >= 2 pipeline
/// stages (the base's pp or another; zb-h1 when the base has no pipeline): the same micro-batch
/// count, tp, ZeRO stage, recomputation and schedule, each stage some dp_s (a multiple of the
/// granule dividing the micro-batch) and a run of layer clusters, all dp_s x tp adding up to the
/// cluster. A stage of dp_s is priced by simulating the homogeneous pipeline of dp_s replicas per
/// stage (`options` as the search's, with its cache), as its chunk position's fixed cost plus its
/// units; its states and activations per micro-batch in flight as that stage's, scaled by the
/// units held (the DP checks them under the schedule; the simulation of the answer decides).
/// nullopt when the base does not
/// qualify or no stage shape other than the base's simulates. Deterministic.
std::optional<StrategySpec> submesh_candidate(const model::ScalableModel& model,
                                              const cost::Cluster& cluster,
                                              const StrategySpec& base,
                                              const cost::SimulationResult& base_sim,
                                              const cost::SimulateOptions& options, int64_t stages,
                                              const SubMeshOptions& sub = {});

}  // namespace heddle::search
