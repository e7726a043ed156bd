// Training checkpoints: the parameters and optimizer state of a run (as each process holds them:
// whole on threads, a rank's tiles under MPI), its step count and data position, written
// atomically with a manifest of per-file checksums, and read back whole for any mesh or strategy
// (each run then cuts its own tiles, as from a model's weights). A checkpoint that fails any
// check (checksum, size, a missing file, a manifest that does not fit the run) is refused with a
// diagnostic naming the file and the rule, never loaded. Format: docs/reliability.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Executor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// What a run was, recorded in the manifest. `model`, `optimizer`, `lr` and `seed` must match
/// on resume (they change what the steps compute); `mesh`, `strategy`, `plan` and `backend` may
/// differ (the tensors are resharded) and are reported.
struct CheckpointRun {
  std::string model;      ///< the model's name (graph name). Default empty.
  std::string optimizer;  ///< adamw or sgd. Default empty.
  double lr = 0;          ///< learning rate. Default 0.
  uint64_t seed = 0;      ///< parameters from seed, the synthetic batch from seed + 1. Default 0.
  std::string mesh;       ///< the mesh the tensors were sharded over. Default empty.
  std::string strategy;   ///< the strategy it ran. Default empty.
  std::string plan;       ///< a digest (hex) of the plan's text. Default empty.
  std::string backend;    ///< threads or mpi. Default empty.
};

/// Collective over the processes that write one checkpoint: every process's `mine` (the same
/// length everywhere), in rank order. The MPI backend passes MpiCommunicator::exchange; a single
/// process the identity.
using AllGather = std::function<Result<std::vector<int64_t>>(const std::vector<int64_t>& mine)>;

/// Where and how often a run writes checkpoints, and who writes.
struct CheckpointOptions {
  std::string dir;       ///< --checkpoint DIR (created when missing). Required.
  int every = 1;         ///< write after every step that is a multiple of this, >= 1. Default 1.
  int64_t rank = 0;      ///< this process's rank; rank 0 writes the manifest. Default 0.
  int64_t ranks = 1;     ///< processes writing shards. Default 1.
  AllGather all_gather;  ///< collective over the ranks; empty: a single process. Default empty.
  CheckpointRun run;     ///< recorded in the manifest.
  int keep = 2;          ///< complete checkpoints kept in `dir` (older ones are removed), >= 1.
};

/// Writes checkpoint `step` into `o.dir`: this rank's tiles of every parameter and optimizer
/// state of `updates` (read from `tensors`, by value id; whole or tiles, each with its region)
/// into `step-NNNNNNNN/rank-R.bin`, then (rank 0, once every rank wrote) the manifest with every
/// file's size and checksum, then `latest`, each atomically (temporary, fsync, rename). A process
/// killed at any point leaves the previous checkpoint intact and `latest` naming it. Collective
/// when `o.all_gather` is set: every rank gets the same status. Diagnostics name the file and the
/// system's reason. Test-only: HEDDLE_TEST_CHECKPOINT_KILL=RANK:NTH:PHASE makes rank RANK raise
/// SIGKILL in its NTH write at PHASE `shard` (its shard written, not yet renamed), `manifest`
/// (rank 0: every shard renamed, no manifest yet) or `latest` (the manifest written, not
/// `latest`).
Status write_checkpoint(const Graph& g, const std::vector<ParamUpdate>& updates,
                        const TensorMap& tensors, int step, const CheckpointOptions& o);

/// The step-loop hook (StepLoopOptions::after_update) that writes a checkpoint after every step
/// that is a multiple of `o.every`.
std::function<Status(int step, const TensorMap& tensors)> checkpoint_hook(
    const Graph& g, const std::vector<ParamUpdate>& updates, CheckpointOptions o);

/// A checkpoint read back.
struct LoadedCheckpoint {
  int step = 0;               ///< the last step it holds; the run continues at step + 1
  int64_t data_position = 0;  ///< batches the run had consumed (the synthetic task: step)
  CheckpointRun run;          ///< what the writing run recorded
  std::string path;           ///< the step directory read
  /// The manifest's checksum (FNV-1a, hex): it lists every file's checksum, so equal values mean
  /// the same checkpoint (what MPI ranks compare before resuming).
  std::string manifest_fnv1a;
  /// Every parameter and optimizer state of the updates, by value id of the resuming graph:
  /// whole, or (read with `need`) just the needed tiles, each with its region. Feed them as a
  /// model's weights (each backend cuts its own tiles).
  std::map<ValueId, Tensor> tensors;
  /// The shard files read (rank order): every rank's, or with `need` only those holding tiles
  /// the reader needs.
  std::vector<int64_t> shards_read;
};

/// Reads the checkpoint `dir/latest` names and checks it before returning anything: the
/// manifest's format; every file present with the recorded size and checksum; every parameter
/// and optimizer state of `updates` present with `g`'s name, dtype and shape and covered whole by
/// the shards; `model`, `optimizer`, `lr` and `seed` equal to `run`'s. Diagnostics name the file
/// and the rule broken.
///
/// With `need` (value id -> box; a process's tiles, e.g. an MPI rank's loads), every index is
/// read and checked but only the shard files holding needed tiles are: first `reader`'s own
/// (the same mesh resumes from its own file alone), then others in rank order while they add
/// needed elements. `tensors` then holds each needed value's box, which must be covered whole;
/// values `need` leaves out are not returned.
Result<LoadedCheckpoint> read_checkpoint(
    const std::string& dir, const Graph& g, const std::vector<ParamUpdate>& updates,
    const CheckpointRun& run, const std::optional<std::map<ValueId, Box>>& need = std::nullopt,
    int64_t reader = 0);

}  // namespace heddle
