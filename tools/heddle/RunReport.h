// What both backends of `heddle run` share after executing: the summary printed (text or JSON).
// The summary is the driver's (heddle/driver/RunRequest.h).
#pragma once

#include "RunCommand.h"
#include "heddle/driver/RunRequest.h"

namespace heddle::cli {

/// What a run's summary says: the driver's, printed below.
using driver::RunSummary;

/// Prints the summary of a run (text, or JSON with --json); returns 0, or 3 after a mismatch
/// (also reported on stderr).
int report_run(const RunOptions& o, const RunSummary& s);

}  // namespace heddle::cli
