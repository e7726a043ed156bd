// A simulate request: a model priced under one strategy on a cluster (`heddle simulate`), its
// JSON report, and the cluster a request names with its memory per device overridden (plan and
// simulate). The CLI and the Python module parse their arguments into these, call and print.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/Simulator.h"
#include "heddle/export/Export.h"
#include "heddle/model/LoadModel.h"
#include "heddle/model/ScalableModel.h"
#include "heddle/search/ConfigSearch.h"

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

/// A simulated step, the model as the simulator saw it and the step as the exports describe it.
struct SimulatedModel {
  model::ScalableModel model;
  search::ConfigResult priced;        ///< the strategy and its simulated step, as a plan's
  exporting::ExportPlan export_plan;  ///< the stacks that can run it and its rank groups
  /// The simulated step.
  const cost::SimulationResult& result() const { return priced.sim; }
};

/// Parses the strategy, loads the model and simulates one step on `cluster`. Diagnostics: the
/// strategy's, the model's, an unknown stage planner, the simulator's. A step that does not fit
/// is a result (cost::infeasibility() says why).
Result<SimulatedModel> simulate_model(const SimulateModelRequest& r, const cost::Cluster& cluster);

/// simulate_model() on a model already loaded (the Python module's), `r.model` unused. The
/// same diagnostics, less the model's.
Result<SimulatedModel> simulate_resolved(const SimulateModelRequest& r,
                                         const cost::Cluster& cluster, model::ScalableModel model);

/// `heddle simulate --json`: the step (cost::simulation_json()) with `runnable_by` (the stacks
/// that can run it) and `rank_groups`.
nlohmann::json simulate_report_json(const SimulatedModel& s);

}  // namespace heddle::driver
