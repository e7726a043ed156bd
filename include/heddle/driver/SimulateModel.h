// A simulate request: a model priced under one strategy on a cluster (`heddle simulate`), and the
// cluster a request names with its memory per device overridden (plan and simulate). The CLI
// parses its flags into these, calls and prints the result (cost/StepReport.h).
#pragma once

#include <string>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/Simulator.h"
#include "heddle/model/LoadModel.h"
#include "heddle/model/ScalableModel.h"

namespace heddle::driver {

/// The cluster `spec` names (a preset or a JSON file, cost::resolve_cluster()), every device's
/// memory set to `memory` (e.g. `40GiB`) unless that is empty. Diagnostics: the cluster's, a
/// size that is not one.
Result<cost::Cluster> resolve_cluster(const std::string& spec, const std::string& memory);

/// What `heddle simulate` is asked for, as given.
struct SimulateModelRequest {
  /// The model (its `options` are ignored: the simulator rebuilds it at each size).
  model::ModelRequest model;
  std::string strategy;                   ///< the strategy text (required)
  std::string stage_planner = "tactics";  ///< `tactics` (default) or `ilp` (as plan may choose)
  bool train = false;                     ///< a training step (default: forward)
  bool overlap = false;   ///< overlap reduction and sends with compute (default off)
  bool trace = false;     ///< make the Chrome trace (default off)
  bool executor = false;  ///< price heddle's own executor (`run`; default off)
};

/// A simulated step and the model as the simulator saw it.
struct SimulatedModel {
  model::ScalableModel model;
  cost::SimulationResult result;
};

/// Parses the strategy, loads the model and simulates one step on `cluster`. Diagnostics: the
/// strategy's, the model's, an unknown stage planner, the simulator's. A step that does not fit
/// is a result (cost::infeasibility() says why).
Result<SimulatedModel> simulate_model(const SimulateModelRequest& r, const cost::Cluster& cluster);

}  // namespace heddle::driver
