// The run request `heddle run` and `heddle.run` share: a zoo model prepared, planned, lowered and
// run on thread-devices with the reference check, forward and training, SPMD and pipelined; keys a
// run without pp cannot honour are refused.
#include <gtest/gtest.h>

#include "heddle/driver/RunRequest.h"

namespace heddle::driver {
namespace {

Result<ThreadRun> run(const RunRequest& r) {
  model::ModelRequest m = r.model;
  m.options.with_loss = r.train;
  auto loaded = model::load_model_to_run(m);
  HEDDLE_TRY(loaded);
  auto p = prepare_run(r, std::move(*loaded));
  HEDDLE_TRY(p);
  return run_threads(r, *p, {});
}

RunRequest tiny(const std::string& mesh, const std::string& strategy) {
  RunRequest r;
  r.model.source = "gpt-tiny";
  r.model.overrides.layers = 2;
  r.mesh = mesh;
  r.strategy = strategy;
  r.check = true;
  return r;
}

TEST(RunRequest, ForwardOnTwoDevicesMatchesTheReference) {
  auto ran = run(tiny("2", "dp=2"));
  ASSERT_TRUE(ran.ok()) << ran.error().to_string();
  const RunSummary& s = ran->summary;
  ASSERT_NE(s.check, nullptr);
  EXPECT_TRUE(s.check->ok);
  EXPECT_EQ(s.mesh.num_devices(), 2);
  EXPECT_EQ(s.devices_text, "2 threads");
  EXPECT_EQ(s.result.step_times_s.size(), 1u);
  EXPECT_EQ(s.peak_bytes_per_device.size(), 2u);
  EXPECT_FALSE(s.digest.empty());
}

TEST(RunRequest, TrainingStepsOnAPipelineMatchTheReference) {
  RunRequest r = tiny("2", "pp=2");
  r.train = true;
  r.steps = 2;
  auto ran = run(r);
  ASSERT_TRUE(ran.ok()) << ran.error().to_string();
  const RunSummary& s = ran->summary;
  EXPECT_TRUE(s.check && s.check->ok);
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.result.losses.size(), 2u);
  EXPECT_EQ(steps_of(r), 2);
  r.steps = -1;
  EXPECT_EQ(steps_of(r), 10);
}

TEST(RunRequest, KeysWithoutPipelineStagesAreRefused) {
  auto ran = run(tiny("1", "recompute=full"));
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.error().message.find("recompute=full: heddle run does that only with pipeline "
                                     "stages (pp > 1)"),
            std::string::npos)
      << ran.error().message;
}

}  // namespace
}  // namespace heddle::driver
