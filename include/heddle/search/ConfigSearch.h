// The inter-op and parallel-configuration search behind `heddle plan`: every combination of
// tensor, pipeline and data parallel degrees, micro-batch size, pipeline schedule, ZeRO stage and
// recomputation that the cluster and model allow, each simulated; the fastest that fits wins.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"

namespace heddle::search {

/// Options of search_configs().
struct ConfigSearchOptions {
  bool train = false;        ///< plan a training step (default: inference)
  StrategySpec pins;         ///< degrees and settings the user fixed (`auto,pp=8`)
  double time_limit_s = 60;  ///< stop and return the best so far; default 60 s
  /// Called after each simulated configuration with (done, total); default none.
  std::function<void(int64_t, int64_t)> progress;
};

/// One evaluated configuration.
struct ConfigResult {
  StrategySpec spec;
  cost::SimulationResult sim;
};

/// The search's answer.
struct ConfigSearch {
  ConfigResult best;                  ///< fastest feasible configuration
  std::vector<ConfigResult> ranking;  ///< feasible configurations, fastest first (up to 10)
  int64_t evaluated = 0;              ///< configurations simulated
  int64_t candidates = 0;             ///< configurations the space holds
  bool complete = true;               ///< false when the time limit cut the search short
  double search_time_s = 0;
};

/// Searches the configuration space. Within a layout (tp, pp, dp, micro-batch, schedule) the
/// memory ladder is tried cheapest first: no recomputation and no ZeRO, then ZeRO-1 with
/// selective and with full recomputation, then ZeRO-3 with full recomputation; the first that fits
/// is kept. Nothing fits: a diagnostic "no plan fits in X per device; the smallest found needs Y
/// (strategy ...)". Deterministic for equal inputs (up to the time limit).
Result<ConfigSearch> search_configs(const cost::ModelSource& model, const cost::Cluster& cluster,
                                    const ConfigSearchOptions& options = {});

}  // namespace heddle::search
