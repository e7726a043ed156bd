#include "heddle/driver/RunCheckpoints.h"

#include <fmt/format.h>

#include "heddle/driver/RunRequest.h"
#include "heddle/support/Hash.h"
#include "heddle/support/Log.h"

namespace heddle::driver {

CheckpointRun checkpoint_run(const RunRequest& r, const Graph& g, const RunSummary& planned) {
  const std::string plan = planned.mesh.to_string() + "|" + planned.strategy + "|" + planned.note;
  const bool sgd = r.optimizer.optimizer == TrainStepOptions::Optimizer::kSgdMomentum;
  return CheckpointRun{.model = g.name(),
                       .optimizer = sgd ? "sgd" : "adamw",
                       .lr = sgd ? r.optimizer.sgd.lr : r.optimizer.adamw.lr,
                       .seed = r.seed,
                       .mesh = planned.mesh.to_string(),
                       .strategy = planned.strategy,
                       .plan = fmt::format("{:016x}", fnv1a_64(plan.data(), plan.size())),
                       .backend = r.backend};
}

Result<CheckpointPlan> plan_checkpoints(const RunRequest& r, const Graph& g,
                                        const std::vector<ParamUpdate>& updates,
                                        const RunSummary& planned, CheckpointScope scope) {
  CheckpointPlan out;
  if (!r.train) return out;
  const CheckpointRun run = checkpoint_run(r, g, planned);
  if (!r.resume_dir.empty()) {
    auto ck = read_checkpoint(r.resume_dir, g, updates, run, scope.need, scope.rank);
    HEDDLE_TRY(ck);
    if (ck->step >= steps_of(r))
      return Diagnostic(fmt::format(
          "--resume {}: the checkpoint is at step {}, and --steps {} leaves nothing to run: give "
          "--steps above {}",
          r.resume_dir, ck->step, steps_of(r), ck->step));
    const bool reshard = ck->run.mesh != run.mesh || ck->run.strategy != run.strategy;
    log(LogLevel::kInfo, "checkpoint",
        fmt::format("resuming at step {} from {}{}", ck->step + 1, ck->path,
                    reshard ? fmt::format(" (written on mesh {} strategy '{}': resharded)",
                                          ck->run.mesh, ck->run.strategy)
                            : ""));
    out.resume = std::move(*ck);
  }
  if (!r.checkpoint_dir.empty())
    out.after_update = checkpoint_hook(g, updates,
                                       CheckpointOptions{.dir = r.checkpoint_dir,
                                                         .every = r.checkpoint_every,
                                                         .rank = scope.rank,
                                                         .ranks = scope.ranks,
                                                         .all_gather = std::move(scope.all_gather),
                                                         .run = run,
                                                         .keep = 2});
  return out;
}

}  // namespace heddle::driver
