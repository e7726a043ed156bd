// What a front end's `run` is asked for, as given (`heddle run`'s flags, `heddle.run`'s keywords):
// checked before any work, turned into the driver's RunRequest, and the checks a run makes once
// its session exists. The CLI parses into RunArguments and calls these; it holds no run logic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heddle/driver/RunRequest.h"
#include "heddle/model/LoadModel.h"
#include "heddle/runtime/Session.h"
#include "heddle/sharding/UserTactics.h"

namespace heddle::driver {

/// Everything a run was asked for.
struct RunArguments {
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
  /// threads; choose_backend()).
  std::string backend;
  std::string emit_dir;          ///< --emit DIR (default none)
  bool check = false;            ///< --check (default off)
  bool train = false;            ///< --train (default off)
  bool no_ring_overlap = false;  ///< --no-ring-overlap (default off: ring exchanges overlap)
  bool profile = false;          ///< --profile (default off; RunRequest::profile)
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

/// The rules before loading: --steps >= 1, a known --optimizer, tolerances >= 0, no --output
/// with --train, a mesh the backend can run, --output and --emit writable, the checkpoint flags
/// (they need --train; --checkpoint-every needs --checkpoint and is >= 1; the directory can be
/// created), and with the mpi backend a positive --timeout.
Status check_run_arguments(const RunArguments& a);

/// The model `a` names, as the model layer takes it (with its loss for --train).
model::ModelRequest model_request(const RunArguments& a);

/// The driver's request for `a`.
RunRequest run_request(const RunArguments& a);

/// MODEL loaded to run (model::load_model_to_run).
Result<model::LoadedModel> load_runnable(const RunArguments& a);

/// The .npy files fed to the graph's inputs in order: --input's, then --labels (the loss's
/// input comes last). Empty: random inputs.
std::vector<std::string> input_paths(const RunArguments& a);

/// The checks once the session exists, before anything is allocated: --output needs a graph of
/// one output; what the run holds on the host (feeds, devices' peaks, the reference with
/// --check) fits --host-memory, else the physical memory.
Status check_run_fits(const RunArguments& a, const Graph& g, const Session& session);

/// The arguments that change what a run computes, in one canonical line (not paths: a model or
/// input file may sit at another path on another host; their bytes are compared instead). The
/// MPI launch agreement compares it across ranks.
std::string launch_arguments(const RunArguments& a);

}  // namespace heddle::driver
