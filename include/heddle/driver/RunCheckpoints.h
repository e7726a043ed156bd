// A training run's checkpoints as a run request asks for them (heddle/runtime/Checkpoint.h): what
// the manifest records of the run, the checkpoint resumed (read whole, or only the tiles one
// process feeds) and the writer called after each update. Both backends use them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "heddle/runtime/Checkpoint.h"

namespace heddle::driver {

struct RunRequest;
struct RunSummary;

/// Where one process stands among the processes that write and read one checkpoint.
struct CheckpointScope {
  int64_t rank = 0;      ///< this process's rank; rank 0 writes the manifest (default 0)
  int64_t ranks = 1;     ///< processes writing shards (default 1)
  AllGather all_gather;  ///< collective over the ranks; empty (default): a single process
  /// The tiles this process feeds of the saved tensors (value id -> box): a resume reads only
  /// the shard files holding them. Default nullopt: read every shard, tensors whole.
  std::optional<std::map<ValueId, Box>> need;
};

/// A training run's checkpoints, decided.
struct CheckpointPlan {
  /// The checkpoint to continue from: its tensors replace the initial parameters and optimizer
  /// state, and the run starts at its step + 1. Default none: start at step 1.
  std::optional<LoadedCheckpoint> resume;
  /// Writes checkpoints after each update (checkpoint_hook()). Default none.
  std::function<Status(int step, const TensorMap& tensors)> after_update;
};

/// What the manifest records of a run of `r` on `g` planned as `planned` says (its mesh,
/// strategy, and a digest of its mesh, strategy and note).
CheckpointRun checkpoint_run(const RunRequest& r, const Graph& g, const RunSummary& planned);

/// The checkpoints of `r` (training with resume_dir or checkpoint_dir; else none) for the process
/// `scope` names: the checkpoint in resume_dir read and checked (read_checkpoint, only the
/// shards holding `scope.need`), which must leave steps to run; its mesh and strategy are logged
/// when they differ from this run's (the tensors are resharded). Keeps references to `g` and
/// `updates` (the writer's), which must outlive the plan.
Result<CheckpointPlan> plan_checkpoints(const RunRequest& r, const Graph& g,
                                        const std::vector<ParamUpdate>& updates,
                                        const RunSummary& planned, CheckpointScope scope);

}  // namespace heddle::driver
