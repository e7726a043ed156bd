// A run's summary as the one JSON object `heddle run --json` prints (keys: docs/cli.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "heddle/driver/RunRequest.h"

namespace heddle::driver {

/// The summary `s` of a run on `backend` (`threads` or `mpi`) as JSON: ok, devices, mesh,
/// strategy, times, collectives, reshards, digests; `pipeline` with stages; the check's errors
/// with one; `loss` when `train`; per-rank feed bytes under MPI; per-device peaks when known.
nlohmann::json summary_json(const RunSummary& s, const std::string& backend, bool train);

}  // namespace heddle::driver
