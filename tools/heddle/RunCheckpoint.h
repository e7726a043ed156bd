// `heddle run --train`'s checkpoint flags: --checkpoint DIR, --checkpoint-every N, --resume DIR,
// checked and turned into the runtime's checkpoint calls (heddle/runtime/Checkpoint.h) for both
// backends.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "RunCommand.h"
#include "heddle/runtime/Checkpoint.h"
#include "heddle/sharding/Mesh.h"

namespace heddle::cli {

/// Registers --checkpoint, --checkpoint-every and --resume on `app`, filling `o`.
void add_checkpoint_flags(CLI::App* app, RunOptions& o);

/// The flags' rules before any work: they need --train; --checkpoint-every needs --checkpoint and
/// is >= 1; the checkpoint directory can be created.
Status check_checkpoint_flags(const RunOptions& o);

/// What the manifest records of this run: model, optimizer, lr, seed, and the mesh, strategy and
/// plan (a digest of `plan_note`) of `backend`.
CheckpointRun checkpoint_run(const RunOptions& o, const Graph& g, const Mesh& mesh,
                             const std::string& strategy, const std::string& plan_note);

/// With --resume: the checkpoint read and checked (read_checkpoint), which must leave steps to
/// run before --steps; its mesh and strategy are logged when they differ from this run's (the
/// tensors are resharded). Without: nullopt.
Result<std::optional<LoadedCheckpoint>> resume_if_asked(const RunOptions& o, const Graph& g,
                                                        const std::vector<ParamUpdate>& updates,
                                                        const CheckpointRun& run);

/// The checkpoint options of --checkpoint for process `rank` of `ranks` (`all_gather` empty for
/// one process).
CheckpointOptions checkpoint_options(const RunOptions& o, const CheckpointRun& run, int64_t rank,
                                     int64_t ranks, AllGather all_gather);

}  // namespace heddle::cli
