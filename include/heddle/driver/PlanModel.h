// A plan request: a model, a cluster and the search's figures turned into the fastest plan that
// fits, the user's strategies priced beside it, its export, its files (plan.json, trace.json,
// graph.dot) and its report as text or JSON. `heddle plan` parses its flags into a
// PlanModelRequest, calls plan_model() and prints; it holds no planning logic.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "heddle/cost/Cluster.h"
#include "heddle/export/Export.h"
#include "heddle/export/PlanTarget.h"
#include "heddle/model/LoadModel.h"
#include "heddle/model/ScalableModel.h"
#include "heddle/search/ConfigSearch.h"
#include "heddle/search/PlanReport.h"
#include "heddle/search/PlanSplit.h"

namespace heddle::driver {

/// What `heddle plan` is asked for, as given.
struct PlanModelRequest {
  /// The model (its `options` are ignored: the search rebuilds it at each size).
  model::ModelRequest model;
  std::string cluster;            ///< a preset (`a100x64`, `cpu`) or a cluster JSON file
  std::string memory;             ///< memory per device, e.g. `40GiB` (default empty: the device's)
  std::string strategy = "auto";  ///< `auto` (default) or pins: `auto,pp=8`
  bool train = false;             ///< plan a training step (default: forward)
  bool overlap = false;           ///< overlap reduction and sends with compute (default off)
  std::vector<std::string> compare;  ///< strategies priced beside the plan (default none)
  double time_limit_s = 60;          ///< search time limit in seconds (default 60)
  double target_step_time_s = 0;     ///< > 0: the fewest devices reaching it (default off)
  std::string objective = "time";    ///< `time` (default) or `energy`
  int64_t max_devices = 0;           ///< > 0: plans may use up to this many (default 0: all)
  exporting::TargetFlags target;     ///< --target, --export, --memory-reserve (default none)
  std::string out_dir;  ///< checked writable before the search (default empty: no files)
  /// Called as the search proceeds with (configurations done, total); default none.
  std::function<void(int64_t, int64_t)> progress;
};

/// The plan found, with everything its report says.
struct PlannedModel {
  PlanModelRequest request;           ///< as asked (without `progress`)
  cost::Cluster cluster;              ///< as resolved, with --memory and the reserve applied
  model::ScalableModel model;         ///< as loaded for costing
  search::ConfigSearch found;         ///< the search: best, fastest, least energy, ranking
  exporting::PlanTarget target;       ///< the parsed --target/--export/--memory-reserve
  exporting::ExportPlan best_export;  ///< the winner as the exporters see it
  std::vector<search::ComparedPlan> compared;  ///< the --compare strategies, priced
  std::vector<std::string> warnings;           ///< about the workload's defaults
  std::optional<exporting::Export> exported;   ///< set by export_planned() with --export
  /// Per stage mesh of the winner: the ops left whole and the idle axes, and why.
  std::vector<search::StageSplit> splits;
};

/// Checks `r` (the output directory first: a long search must not end in "cannot write"),
/// resolves the cluster, loads the model, searches and prices `r.compare`. Diagnostics: each
/// input's, and a failed search (naming --target when it restricted the search).
Result<PlannedModel> plan_model(const PlanModelRequest& r);

/// plan_model() for a cluster and a model already resolved (the Python module's objects):
/// `r.cluster`, `r.memory`, `r.out_dir` and `r.model.source` are not read; `cluster` is used as
/// given (its memory already set), and `r.model.overrides.batch` only says whether the batch was
/// chosen (for the workload warnings). Diagnostics as plan_model()'s, after the loading.
Result<PlannedModel> plan_resolved(const PlanModelRequest& r, cost::Cluster cluster,
                                   model::ScalableModel model);

/// Writes the plan in the --export format into `p.exported` (nothing without --export).
/// Diagnostic: the exporter's.
Status export_planned(PlannedModel& p);

/// Writes plan.json (with the target keys), the export's file, trace.json (when the winner's
/// step simulates) and graph.dot (one layer) into `p.request.out_dir`, creating it.
Status write_plan_files(const PlannedModel& p);

/// `heddle plan --json`: the winner's keys, the search's figures, the fastest and least-energy
/// plans, the explanation (step, ranking, compare, warnings, cluster, overlap), the target keys
/// and the export's text.
nlohmann::json plan_report_json(const PlannedModel& p);

/// `heddle plan`'s text: the winner, step time, memory, assumptions, pipeline, stacks that run
/// it, sub-meshes, stage planner, energy trade-off, the search, the breakdown, the compared
/// strategies and the ranking.
std::string plan_report_text(const PlannedModel& p);

}  // namespace heddle::driver
