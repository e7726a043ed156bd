// `heddle run --train`'s checkpoint flags, checked and handed to the runtime.
#include "RunCheckpoint.h"

#include <fmt/format.h>

#include "heddle/support/AtomicFile.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Log.h"

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

CheckpointRun checkpoint_run(const RunOptions& o, const Graph& g, const Mesh& mesh,
                             const std::string& strategy, const std::string& plan_note) {
  const std::string plan = mesh.to_string() + "|" + strategy + "|" + plan_note;
  return CheckpointRun{.model = g.name(),
                       .optimizer = o.optimizer,
                       .lr = o.lr,
                       .seed = o.seed,
                       .mesh = mesh.to_string(),
                       .strategy = strategy,
                       .plan = fmt::format("{:016x}", fnv1a_64(plan.data(), plan.size())),
                       .backend = o.backend};
}

Result<std::optional<LoadedCheckpoint>> resume_if_asked(const RunOptions& o, const Graph& g,
                                                        const std::vector<ParamUpdate>& updates,
                                                        const CheckpointRun& run) {
  if (o.resume_dir.empty()) return std::optional<LoadedCheckpoint>();
  auto ck = read_checkpoint(o.resume_dir, g, updates, run);
  HEDDLE_TRY(ck);
  if (ck->step >= run_steps_of(o))
    return Diagnostic(fmt::format(
        "--resume {}: the checkpoint is at step {}, and --steps {} leaves nothing to run: give "
        "--steps above {}",
        o.resume_dir, ck->step, run_steps_of(o), ck->step));
  const bool reshard = ck->run.mesh != run.mesh || ck->run.strategy != run.strategy;
  log(LogLevel::kInfo, "checkpoint",
      fmt::format("resuming at step {} from {}{}", ck->step + 1, ck->path,
                  reshard ? fmt::format(" (written on mesh {} strategy '{}': resharded)",
                                        ck->run.mesh, ck->run.strategy)
                          : ""));
  return std::optional<LoadedCheckpoint>(std::move(*ck));
}

CheckpointOptions checkpoint_options(const RunOptions& o, const CheckpointRun& run, int64_t rank,
                                     int64_t ranks, AllGather all_gather) {
  return CheckpointOptions{.dir = o.checkpoint_dir,
                           .every = o.checkpoint_every == -1 ? 1 : o.checkpoint_every,
                           .rank = rank,
                           .ranks = ranks,
                           .all_gather = std::move(all_gather),
                           .run = run,
                           .keep = 2};
}

}  // namespace heddle::cli
