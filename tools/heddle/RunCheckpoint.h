// `heddle run --train`'s checkpoint flags: --checkpoint DIR, --checkpoint-every N, --resume DIR,
// registered and checked; the driver writes and resumes (heddle/driver/RunCheckpoints.h).
#pragma once

#include "RunCommand.h"

namespace heddle::cli {

/// Registers --checkpoint, --checkpoint-every and --resume on `app`, filling `o`.
void add_checkpoint_flags(CLI::App* app, RunOptions& o);

/// The flags' rules before any work: they need --train; --checkpoint-every needs --checkpoint and
/// is >= 1; the checkpoint directory can be created.
Status check_checkpoint_flags(const RunOptions& o);

}  // namespace heddle::cli
