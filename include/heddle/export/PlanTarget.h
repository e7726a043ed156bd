// Which stack must run a plan (`--target`), the file written for it (`--export`) and the memory
// kept per device for the runtime (`--memory-reserve`): parsed, applied to the cluster and the
// search, and the `target`, `runnable_by` and `rank_groups` keys every plan reports. The CLI and
// the Python module call these.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "heddle/export/Export.h"

namespace heddle::exporting {

/// The flags as given.
struct TargetFlags {
  std::string target;         ///< empty (default): the --export format, else `any`
  std::string export_format;  ///< empty (default): no export
  /// Bytes per device for the CUDA context, NCCL and cuBLAS buffers: replaces the allocator
  /// allowance's fixed part (cost::DeviceProfile::runtime_bytes) on every device kind. Empty
  /// (default): the device's own (2 GB on the GPU presets); `0`: none.
  std::string memory_reserve;
};

/// The parsed flags.
struct PlanTarget {
  Target target = Target::kAny;     ///< default any stack
  std::optional<Target> export_to;  ///< default none
  /// The allowance's fixed part per device the plan is priced with (the device's runtime_bytes
  /// unless --memory-reserve gives it); counted in every stage's peak, not taken off the memory.
  double reserve_bytes = 0;
};

/// Parses `flags`, sets the reserve as `cluster`'s runtime memory per device and keeps the search
/// `o` to what the target runs (its pins and `admits`). Diagnostics name the flag.
Result<PlanTarget> apply_target_flags(const TargetFlags& flags, cost::Cluster& cluster,
                                      search::ConfigSearchOptions& o);

/// Adds `target`, `memory_reserve_bytes`, `runnable_by` and `rank_groups` of `best` to `j`.
void add_target_json(nlohmann::json& j, const PlanTarget& t, const ExportPlan& best);

/// The stacks that can run `best`, comma-separated (`none` when none can).
std::string runnable_text(const ExportPlan& best);

}  // namespace heddle::exporting
