// How a plan is reported: its JSON keys (`heddle plan --json`, the Python Plan), its ranking, and
// the user's own strategies (`heddle plan --compare S`) priced beside the plan,
// with the step breakdown difference that explains the gap, and what tied rows of the ranking
// differ in.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"
#include "heddle/search/ConfigSearch.h"

namespace heddle::search {

/// Per pipeline stage of `r`: its sub-mesh (`dp`, `tp`, `devices`), micro-batch per replica and
/// layers (JSON `stage_meshes`).
nlohmann::json stage_meshes_json(const cost::SimulationResult& r);

/// A plan's keys as `heddle plan --json` prints them (strategy, step_time_s, mfu, ...,
/// stage_meshes).
nlohmann::json plan_json(const ConfigResult& c);

/// One `--compare` strategy, priced.
struct ComparedPlan {
  std::string given;           ///< the strategy as the user wrote it
  cost::SimulationResult sim;  ///< simulated as the plan was (same model, cluster, options)
};

/// Simulates every strategy of `given` for `model` on `cluster` (with as many of its devices as
/// each strategy's degrees use), training when `train`. Diagnostics name the `--compare` value.
Result<std::vector<ComparedPlan>> price_compared(const std::vector<std::string>& given,
                                                 const model::ScalableModel& model,
                                                 const cost::Cluster& cluster, bool train,
                                                 bool overlap);

/// The `compare` JSON array: per strategy `given`, `strategy`, `devices`, `step_time_s`,
/// `feasible`, `peak_memory_bytes`, `mfu`, `breakdown`, `difference` (seconds
/// per category, the strategy's minus the plan's), `slowdown` (its step over the plan's) and
/// `why` (explain_difference()).
nlohmann::json compare_json(const std::vector<ComparedPlan>& compared,
                            const cost::SimulationResult& plan);

/// The text: the plan's and each strategy's breakdown side by side, then one `why` line each.
std::string compare_text(const std::vector<ComparedPlan>& compared,
                         const cost::SimulationResult& plan);

/// What strategy `a` sets differently from `b`: `zero 1 vs 2, recompute none vs selective`
/// (keys of the canonical strings), or "" when the strings are equal.
std::string strategy_difference(const std::string& a, const std::string& b);

/// The ranking table, each row that ties the one above it (step times within 0.1%) followed by
/// what differs between them and which uses less memory.
std::string ranking_text(const std::vector<ConfigResult>& ranking);

/// The `ranking` JSON array: per alternative its strategy, step time, MFU and memory.
nlohmann::json ranking_json(const std::vector<ConfigResult>& ranking);

}  // namespace heddle::search
