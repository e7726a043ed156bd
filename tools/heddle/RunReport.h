// What both backends of `heddle run` share after executing: the summary printed (text or JSON).
// The summary and the reference check's options are the driver's (heddle/driver/RunRequest.h).
#pragma once

#include <vector>

#include "RunCommand.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/runtime/ReferenceCheck.h"

namespace heddle::cli {

/// The reference check of a run with the tolerances and seed of `o` (AdamW's rule when it is
/// the optimizer): `params` and `inputs` are the whole tensors the partitioned run starts from.
ReferenceCheck make_reference(const Graph& g, const RunOptions& o,
                              const std::vector<ParamUpdate>& updates, TensorMap params,
                              std::vector<Tensor> inputs);

/// What a run's summary says: the driver's, printed below.
using driver::RunSummary;

/// Prints the summary of a run of `g` (text, or JSON with --json); returns 0, or 3 after a
/// mismatch (also reported on stderr).
int report_run(const RunOptions& o, const Graph& g, const RunSummary& s);

}  // namespace heddle::cli
