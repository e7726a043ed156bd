// `plan --target`, `--export` and `--memory-reserve` registered; what they mean is
// heddle/export/PlanTarget.h.
#pragma once

#include <CLI/CLI.hpp>

#include "heddle/export/PlanTarget.h"

namespace heddle::cli {

/// Registers --target, --export and --memory-reserve on `app`.
void add_target_flags(CLI::App* app, exporting::TargetFlags& flags);

}  // namespace heddle::cli
