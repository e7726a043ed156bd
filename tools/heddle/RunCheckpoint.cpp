// `heddle run --train`'s checkpoint flags, registered and checked.
#include "RunCheckpoint.h"

#include "heddle/support/AtomicFile.h"

namespace heddle::cli {

void add_checkpoint_flags(CLI::App* app, RunOptions& o) {
  app->add_option("--checkpoint", o.checkpoint_dir,
                  "With --train: write parameters, optimizer state and the step to DIR (atomic, "
                  "checksummed; docs/reliability.md)");
  app->add_option("--checkpoint-every", o.checkpoint_every,
                  "Write a checkpoint after every N-th step (default 1: every step)");
  app->add_option("--resume", o.resume_dir,
                  "With --train: continue from the latest checkpoint in DIR up to --steps (on any "
                  "mesh or strategy)");
}

Status check_checkpoint_flags(const RunOptions& o) {
  if (!o.train && (!o.checkpoint_dir.empty() || !o.resume_dir.empty()))
    return Diagnostic(
        "--checkpoint and --resume save and restore training state: add --train (a forward run "
        "has none)");
  if (o.checkpoint_every != -1 && o.checkpoint_dir.empty())
    return Diagnostic("--checkpoint-every needs --checkpoint DIR (where to write)");
  if (o.checkpoint_every != -1 && o.checkpoint_every < 1)
    return Diagnostic("--checkpoint-every must be >= 1, got " + std::to_string(o.checkpoint_every));
  if (!o.checkpoint_dir.empty()) HEDDLE_TRY(check_writable_dir(o.checkpoint_dir, "--checkpoint"));
  return {};
}

}  // namespace heddle::cli
