// A run request's checkpoints (heddle/driver/RunCheckpoints.h): what the manifest records of the
// run, a training run stopped at a checkpoint and resumed ending bit-identical to an
// uninterrupted one, and a resume that leaves nothing to run refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "heddle/driver/RunCheckpoints.h"
#include "heddle/driver/RunRequest.h"

namespace heddle::driver {
namespace {

RunRequest training(int steps) {
  RunRequest r;
  r.model.source = "gpt-tiny";
  r.model.overrides.layers = 1;
  r.model.options.with_loss = true;
  r.mesh = "2";
  r.strategy = "dp=2";
  r.train = true;
  r.steps = steps;
  r.optimizer = optimizer_options("sgd", 0.05);
  return r;
}

Result<ThreadRun> run(const RunRequest& r) {
  auto loaded = model::load_model_to_run(r.model);
  HEDDLE_TRY(loaded);
  auto p = prepare_run(r, std::move(*loaded));
  HEDDLE_TRY(p);
  return run_threads(r, *p, {});
}

TEST(RunCheckpoints, TheManifestRecordsTheRun) {
  RunRequest r = training(3);
  RunSummary planned;
  planned.mesh = *Mesh::parse("2");
  planned.strategy = "dp=2";
  planned.note = "note";
  Graph g("tiny");
  CheckpointRun run = checkpoint_run(r, g, planned);
  EXPECT_EQ(run.model, "tiny");
  EXPECT_EQ(run.optimizer, "sgd");
  EXPECT_EQ(run.lr, 0.05);
  EXPECT_EQ(run.strategy, "dp=2");
  EXPECT_EQ(run.backend, "threads");
  EXPECT_EQ(run.plan.size(), 16u);
  planned.note = "another plan";
  EXPECT_NE(checkpoint_run(r, g, planned).plan, run.plan);
}

TEST(RunCheckpoints, AResumedRunEndsBitIdentical) {
  const std::string dir = ::testing::TempDir() + "/driver_ckpt";
  std::filesystem::remove_all(dir);
  auto whole = run(training(4));
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  RunRequest first = training(2);
  first.checkpoint_dir = dir;
  ASSERT_TRUE(run(first).ok());
  RunRequest rest = training(4);
  rest.resume_dir = dir;
  auto resumed = run(rest);
  ASSERT_TRUE(resumed.ok()) << resumed.error().to_string();
  EXPECT_EQ(resumed->summary.result.losses.size(), 2u);
  EXPECT_EQ(resumed->summary.params_digest, whole->summary.params_digest);
  EXPECT_NE(resumed->summary.params_digest, "");
  RunRequest nothing = training(2);
  nothing.resume_dir = dir;
  auto refused = run(nothing);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("leaves nothing to run"), std::string::npos);
}

}  // namespace
}  // namespace heddle::driver
