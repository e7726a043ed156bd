// The cost model's figure for a run's memory: what `heddle simulate --executor` predicts each
// device holds at its peak, which a run on threads prints next to the peak its executor planned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/driver/RunRequest.h"
#include "heddle/support/Result.h"

namespace heddle::driver {

/// The cost model's peak bytes on each of `devices` devices for `r`'s model (training with
/// `r.train`) run as `strategy` (a strategy text, as RunSummary::strategy holds it): the
/// simulator's per-stage peak memory under heddle's executor (`heddle simulate MODEL --cluster
/// cpu --strategy S --executor`, the `cpu` cluster sized to `devices`), repeated over each
/// stage's devices, stages in order. Diagnostics: an `auto` strategy (an op-by-op plan the
/// simulator does not price), the model loader's and the simulator's (a strategy or model it
/// cannot price), and stages whose devices do not add up to `devices`.
Result<std::vector<double>> predicted_peak_bytes(const RunRequest& r, const std::string& strategy,
                                                 int64_t devices);

}  // namespace heddle::driver
