// Which stack must run a plan (`--target`), the file written for it (`--export`) and the memory
// left free per device (`--memory-reserve`): parsed, applied to the cluster and the search, and
// the `target`, `runnable_by` and `rank_groups` keys every plan reports. The CLI and the Python
// module call these.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "heddle/export/Export.h"

namespace heddle::exporting {

/// The flags as given.
struct TargetFlags {
  std::string target;          ///< empty (default): the --export format, else `any`
  std::string export_format;   ///< empty (default): no export
  std::string memory_reserve;  ///< empty (default): default_memory_reserve(); `0`: none
};

/// The parsed flags.
struct PlanTarget {
  Target target = Target::kAny;     ///< default any stack
  std::optional<Target> export_to;  ///< default none
  double reserve_bytes = 0;         ///< subtracted from the cluster's memory per device (default 0)
};

/// Parses `flags`, takes the reserve off `cluster`'s device memory and keeps the search `o` to
/// what the target runs (its pins and `admits`). Diagnostics name the flag.
Result<PlanTarget> apply_target_flags(const TargetFlags& flags, cost::Cluster& cluster,
                                      search::ConfigSearchOptions& o);

/// Adds `target`, `memory_reserve_bytes`, `runnable_by` and `rank_groups` of `best` to `j`.
void add_target_json(nlohmann::json& j, const PlanTarget& t, const ExportPlan& best);

/// The stacks that can run `best`, comma-separated (`none` when none can).
std::string runnable_text(const ExportPlan& best);

}  // namespace heddle::exporting
