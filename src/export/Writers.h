// The per-stack writers behind export_plan(); each assumes expressible() accepted the plan.
#pragma once

#include "heddle/export/Export.h"

namespace heddle::exporting::detail {

/// Megatron-LM command-line arguments, one per line.
Export megatron_args(const ExportPlan& plan);
/// A torchtitan TOML job config: [training], [parallelism], [activation_checkpoint].
Export torchtitan_toml(const ExportPlan& plan);
/// A DeepSpeed JSON config.
Export deepspeed_json(const ExportPlan& plan);

/// The plan's degrees with unset ones 1 (equal per-stage sub-meshes folded into dp and tp).
struct Degrees {
  int64_t dp = 1, tp = 1, pp = 1, cp = 1, chunks = 1, zero = 0;
};
Degrees degrees_of(const StrategySpec& spec);

/// True when every pipeline chunk holds the same number of layers.
bool even_split(const ExportPlan& plan);

}  // namespace heddle::exporting::detail
