// `plan --target`, `--export` and `--memory-reserve`: which stack must run the plan, the file
// written for it, and the memory left free per device; plus the `runnable_by` and `rank_groups`
// every plan reports.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "heddle/export/Export.h"

namespace heddle::cli {

/// The flags as given.
struct TargetFlags {
  std::string target;          ///< empty: the --export format, else `any`
  std::string export_format;   ///< empty: no export
  std::string memory_reserve;  ///< empty: exporting::default_memory_reserve()
};

/// Registers --target, --export and --memory-reserve on `app`.
void add_target_flags(CLI::App* app, TargetFlags& flags);

/// The parsed flags.
struct PlanTarget {
  exporting::Target target = exporting::Target::kAny;
  std::optional<exporting::Target> export_to;
  double reserve_bytes = 0;  ///< subtracted from the cluster's memory per device
};

/// Parses `flags`, takes the reserve off `cluster`'s device memory and keeps the search `o` to
/// what the target runs. Diagnostics name the flag.
Result<PlanTarget> apply_target_flags(const TargetFlags& flags, cost::Cluster& cluster,
                                      search::ConfigSearchOptions& o);

/// Adds `target`, `memory_reserve_bytes`, `runnable_by` and `rank_groups` of `best` to `j`.
void add_target_json(nlohmann::json& j, const PlanTarget& t, const exporting::ExportPlan& best);

/// A plan's keys as `heddle plan --json` prints them (strategy, step_time_s, mfu, ...).
nlohmann::json plan_json(const search::ConfigResult& c);

/// The stacks that can run `best`, comma-separated (`none` when none can).
std::string runnable_text(const exporting::ExportPlan& best);

}  // namespace heddle::cli
