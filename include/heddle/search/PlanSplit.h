// No silent fallback in `heddle plan`: what the chosen plan's stage plans leave unsplit, and why
// (split_report() of each stage mesh's plan, as the simulator costed it), for its text and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "heddle/search/ConfigSearch.h"
#include "heddle/sharding/SplitReport.h"

namespace heddle::search {

/// One stage plan of a configuration: the graph the simulator planned (two repeating units, at
/// the stage's micro-batch), the mesh it was sharded on (without dp when dp only splits the
/// batch) and what that plan leaves unsplit.
struct StageSplit {
  Graph graph;
  Mesh mesh;
  SplitReport report;
};

/// The stage plans of `best` (a configuration the search found for `src` on `cluster`),
/// re-planned as the search simulated them: by the intra-op ILP (within `time_limit_s`) when
/// that won, else by the tactics; one per distinct stage mesh, each with split_report() against
/// the strategy's preset pins. A diagnostic when the simulation fails.
Result<std::vector<StageSplit>> plan_stage_splits(const model::ScalableModel& src,
                                                  const cost::Cluster& cluster,
                                                  const ConfigResult& best, bool train,
                                                  double time_limit_s);

/// For people: per stage mesh with something to say, `stage mesh M:` and
/// SplitReport::to_string() (up to `limit` ops), every line after the first indented by 11
/// spaces (plan's value column); empty when every stage splits everything.
std::string stage_splits_text(const std::vector<StageSplit>& splits, size_t limit = 8);

/// The JSON `split_report` array: per stage mesh `mesh`, `idle_axes` and `unsplit_ops` (keyed as
/// `heddle run --json` keys them: `op`, `result`, `axis`, `dims` of `dim`, `reason`, `detail`).
nlohmann::json stage_splits_json(const std::vector<StageSplit>& splits);

}  // namespace heddle::search
