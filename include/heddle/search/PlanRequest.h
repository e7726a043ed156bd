// What `heddle plan` (and the Python Plan) asks of the configuration search, checked once: the
// search options its figures give, and the files that describe the winner (plan.json and the
// step's trace, simulated by the stage planner that won).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "heddle/search/ConfigSearch.h"

namespace heddle::search {

/// The figures of a plan request, as given.
struct PlanRequest {
  std::string objective = "time";  ///< `time` (default: fastest step) or `energy` (per step)
  int64_t max_devices = 0;         ///< > 0: plans may use fewer devices (default 0: all)
  double target_step_time_s = 0;   ///< > 0: the fewest devices reaching it (default 0: off)
  double time_limit_s = 60;        ///< search time limit, >= 0 (default 60 s)
  bool train = false;              ///< plan a training step (default: forward)
  bool overlap = false;            ///< overlap reduction and sends with compute (default off)
  StrategySpec pins;               ///< what the user fixed (`auto,pp=8`; default nothing)
};

/// The search options of `r` on `cluster`. Diagnostics: an unknown objective, `energy` on a
/// device without power figures, a negative --max-devices or --target-step-time, a time limit
/// below zero (or not a number).
Result<ConfigSearchOptions> plan_search_options(const PlanRequest& r, const cost::Cluster& cluster);

/// plan.json: plan_json(best) with the step's keys (add_step_json), the ranking, `model` (as
/// given), `cluster`, `train` and `cluster_devices`.
nlohmann::json plan_file_json(const ConfigSearch& found, const model::ScalableModel& src,
                              const std::string& model, const cost::Cluster& cluster, bool train);

/// The Chrome trace of `best`'s step on `best`'s devices of `cluster`, simulated as it was
/// planned: its stages by the intra-op ILP (within `time_limit_s`) when that won, else by the
/// tactics. A diagnostic when the simulation fails.
Result<std::string> plan_trace(const model::ScalableModel& src, const cost::Cluster& cluster,
                               const ConfigResult& best, bool train, bool overlap,
                               double time_limit_s);

}  // namespace heddle::search
