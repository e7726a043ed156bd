// A run's summary as `heddle run` prints it for people, and the reference check's verdict as a
// diagnostic (the JSON form: RunSummaryJson.h).
#pragma once

#include <optional>
#include <string>

#include "heddle/driver/RunArguments.h"
#include "heddle/driver/RunRequest.h"

namespace heddle::driver {

/// The summary as `heddle run` prints it: model, plan, devices, programs, reshards, what is not
/// split, shards, wall time, memory, and with --check the reference, errors and verdict.
std::string summary_text(const RunSummary& s, const RunArguments& a);

/// The reference check's mismatch as a diagnostic (max abs and rel error); nothing when there
/// was no check or it passed.
std::optional<Diagnostic> check_mismatch(const RunSummary& s);

/// A warning naming the first step whose loss is NaN or infinite (a diverged training run, which
/// `--check` cannot catch: NaN compares equal to NaN there); nothing when every loss is finite.
std::optional<std::string> diverged_loss(const RunSummary& s);

}  // namespace heddle::driver
