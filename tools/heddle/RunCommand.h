// `heddle run`'s options and the pieces its backends share: input ranges, the check against the
// interpreter and the summary/JSON report. The threads backend is in RunCommand.cpp, MPI in
// MpiRun.cpp.
#pragma once

#include <string>
#include <vector>

#include "Planning.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"

namespace heddle::cli {

/// Everything `heddle run` was asked for.
struct RunOptions {
  std::string model;                ///< MODEL (required)
  zoo::ZooOverrides overrides;      ///< --layers --hidden ... (default: the zoo's)
  std::string mesh = "1";           ///< --mesh (default 1)
  std::string strategy;             ///< --strategy (default empty: propagation over the mesh)
  std::string backend = "threads";  ///< --backend threads|mpi (default threads)
  std::string emit_dir;             ///< --emit DIR (default none)
  bool check = false;               ///< --check (default off)
  bool json = false;                ///< --json (default off)
  uint64_t seed = 0;                ///< --seed (default 0)
  double timeout_s = 60;            ///< --timeout: MPI collectives' limit in seconds (default 60)
  double rtol = 1e-3;               ///< relative tolerance of --check (default 1e-3)
  double atol = 1e-4;               ///< absolute tolerance of --check (default 1e-4)
};

/// The upper bound of integer inputs: the smallest table or class count they feed (2 if none).
int64_t integer_range(const Graph& g);

/// How a run's outputs compare with the single-device interpreter.
struct RunCheck {
  bool ok = true;
  double max_abs = 0, max_rel = 0;
  double reference_time_s = 0;
};

/// Runs the interpreter (parameters from o.seed) on `inputs` and compares every output with
/// `got` (whole tensors). Precondition: got holds every graph output.
Result<RunCheck> check_against_reference(const Graph& g, const RunOptions& o,
                                         const std::vector<Tensor>& inputs, const TensorMap& got);

/// A hash (FNV-1a, hex) of the outputs' bytes in graph order: equal digests mean bit-identical
/// results, across runs and backends. Precondition: `outputs` holds every graph output.
std::string output_digest(const Graph& g, const TensorMap& outputs);

/// Prints the summary (or with o.json the JSON object) of a run on `devices_text` (e.g.
/// "4 threads") that produced `outputs`; `check` is null without --check. Returns the exit code:
/// 1 on a mismatch.
int report_run(const RunOptions& o, const Graph& g, const PlannedRun& planned,
               const std::vector<DeviceProgram>& programs, const std::string& devices_text,
               double wall_s, const TensorMap& outputs, const RunCheck* check);

/// `heddle run --backend mpi`, one process per device under mpirun (MpiRun.cpp).
int run_mpi(const RunOptions& o);

}  // namespace heddle::cli
