// `heddle run`'s options and what its backends share. The threads backend is RunCommand.cpp, the
// MPI backend MpiRun.cpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "Command.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/RunInputs.h"

namespace heddle::cli {

/// Everything `heddle run` was asked for.
struct RunOptions {
  std::string model;                     ///< MODEL (required)
  zoo::ZooOverrides overrides;           ///< --layers --hidden ... (default: the zoo's)
  std::map<std::string, int64_t> dims;   ///< --dim NAME=VALUE for ONNX dynamic dims (default none)
  std::vector<std::string> input_files;  ///< --input FILE.npy per graph input (default: random)
  std::string loss;         ///< --loss: an ONNX model's training loss (default empty: auto)
  std::string labels_file;  ///< --labels FILE.npy: the last input, the loss's (default: random)
  std::string output_file;  ///< --output FILE.npy (default none)
  std::string mesh = "1";   ///< --mesh (default 1)
  std::string strategy;     ///< --strategy (default empty: propagation over the mesh)
  /// --backend threads|mpi (default empty: mpi when an MPI launcher started several ranks, else
  /// threads; driver::choose_backend()).
  std::string backend;
  std::string emit_dir;  ///< --emit DIR (default none)
  bool check = false;    ///< --check (default off)
  bool json = false;     ///< --json (default off)
  bool train = false;    ///< --train (default off)
  /// --steps: total steps, forward-only runs too (default -1: 10 with --train, else 1).
  int steps = -1;
  /// --host-memory BYTES: what the run may hold on the host (default empty: physical memory).
  std::string host_memory;
  double lr = 1e-2;                 ///< --lr (default 0.01)
  std::string optimizer = "adamw";  ///< --optimizer adamw|sgd (default adamw)
  uint64_t seed = 0;                ///< --seed: parameters use it, inputs seed + 1 (default 0)
  double timeout_s = 60;            ///< --timeout: MPI collectives' limit in seconds (default 60)
  double rtol = 1e-3;               ///< relative tolerance of --check (default 1e-3)
  double atol = 1e-4;               ///< absolute tolerance of --check (default 1e-4)
  std::string checkpoint_dir;       ///< --checkpoint DIR (default none: no checkpoints)
  int checkpoint_every = -1;        ///< --checkpoint-every N (default -1: every step)
  std::string resume_dir;           ///< --resume DIR (default none: start at step 1)
  std::vector<Tactic> tactics;      ///< --tactic, parsed (default none)
};

/// The options both backends check before loading: --steps, --optimizer, the tolerances,
/// --train with --output, and that --output and --emit can be written.
Status check_run_options(const RunOptions& o);

/// The host memory a run may use: --host-memory, else the physical memory (0: unknown).
/// Diagnostic: a --host-memory that is not a size.
Result<int64_t> host_memory_limit(const RunOptions& o);

/// The model `o` names, as the model layer takes it (with its loss for --train).
model::ModelRequest model_request(const RunOptions& o);

/// The driver's request for `o` (heddle/driver/RunRequest.h).
driver::RunRequest run_request(const RunOptions& o);

/// MODEL loaded to run (model::load_model_to_run). Both backends.
Result<model::LoadedModel> load_runnable(const RunOptions& o);

/// The --input files read (runtime read_input_files(), non-finite values an error with
/// --check), warnings printed to stderr. Both backends.
Result<std::vector<Tensor>> read_input_files(const Graph& g, const RunOptions& o);

/// Prints step `step`'s loss (training, without --json) and logs it (`loss` too when
/// `log_loss`).
void print_step(const RunOptions& o, int step, std::optional<float> loss, bool log_loss);

/// `heddle run --backend mpi`, one process per device under mpirun (MpiRun.cpp).
int run_mpi(const RunOptions& o);

}  // namespace heddle::cli
