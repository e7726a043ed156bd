// `heddle run --train --checkpoint DIR / --resume DIR` on the threads backend: params_digest is
// reported; checkpointing does not change the run; a run killed during a checkpoint write (every
// phase) and resumed ends bit-identical to the uninterrupted run; a resume on another mesh
// matches the reference; bad flags and damaged checkpoints exit 1 naming the file and the rule.
// Kills use the test-only HEDDLE_TEST_CHECKPOINT_KILL (heddle/runtime/Checkpoint.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/RunCli.h"

namespace heddle {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;

const std::string kRun = "run gpt-tiny --mesh 2 --strategy dp=2 --train --json --steps ";

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/ckpt_cli_" + name;
  fs::remove_all(d);
  return d;
}

nlohmann::json json_of(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out);
}

// `heddle ARGS` with HEDDLE_TEST_CHECKPOINT_KILL=`kill` (empty: unset).
CliResult run_killed(const std::string& args, const std::string& kill) {
  if (!kill.empty()) setenv("HEDDLE_TEST_CHECKPOINT_KILL", kill.c_str(), 1);
  CliResult r = testing::run_heddle(args);
  unsetenv("HEDDLE_TEST_CHECKPOINT_KILL");
  return r;
}

TEST(CheckpointCli, ParamsDigestIsReportedAndCheckpointingChangesNothing) {
  auto plain = json_of(testing::run_heddle(kRun + "4"), "plain");
  ASSERT_FALSE(plain.is_null());
  ASSERT_TRUE(plain.contains("params_digest"));
  EXPECT_EQ(plain["params_digest"].get<std::string>().size(), 16u);
  EXPECT_FALSE(json_of(testing::run_heddle("run gpt-tiny --mesh 2 --json"), "fwd")
                   .contains("params_digest"));  // training only
  std::string dir = fresh_dir("same");
  auto saved = json_of(testing::run_heddle(kRun + "4 --checkpoint " + dir), "saved");
  EXPECT_EQ(saved["params_digest"], plain["params_digest"]);
  EXPECT_TRUE(fs::exists(dir + "/step-00000004/manifest.json"));
  // Another step count ends elsewhere: the digest tells.
  EXPECT_NE(json_of(testing::run_heddle(kRun + "3"), "3")["params_digest"], plain["params_digest"]);
}

// Killed in each phase of a checkpoint write, then resumed from what survived, repeatedly: the
// final parameters equal the uninterrupted run's bit for bit, and no step before the last
// complete checkpoint is run again.
TEST(CheckpointCli, KilledDuringCheckpointWritesAndResumedIsBitIdentical) {
  const int steps = 6;
  auto plain = json_of(testing::run_heddle(kRun + std::to_string(steps)), "plain");
  ASSERT_FALSE(plain.is_null());
  std::string dir = fresh_dir("killed");
  const std::string args = kRun + std::to_string(steps) + " --checkpoint " + dir;
  // (the write to kill in, its phase, the checkpoint that must survive): each run resumes.
  struct Kill {
    const char* at;
    int survives;
  };
  const Kill kills[] = {{"0:2:shard", 1}, {"0:2:manifest", 2}, {"0:2:latest", 3}};
  for (const Kill& k : kills) {
    std::string resume = fs::exists(dir + "/latest") ? " --resume " + dir : "";
    CliResult r = run_killed(args + resume, k.at);
    EXPECT_EQ(r.exit_code, 128 + 9) << k.at << "\n" << r.err;
    std::ifstream latest(dir + "/latest");
    std::string name;
    latest >> name;
    EXPECT_EQ(name, "step-0000000" + std::to_string(k.survives)) << k.at;
  }
  auto done = json_of(testing::run_heddle(args + " --resume " + dir), "final");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["loss"].size(), 3u);  // steps 4..6: the run resumed after step 3
  EXPECT_EQ(done["params_digest"], plain["params_digest"]);
}

// A checkpoint of dp=2 on 2 devices resumed on 4 devices as dp=2,tp=2: resharded, it matches the
// single-device reference started from the checkpoint, and ends near the uninterrupted run.
TEST(CheckpointCli, ResumeOnAnotherMeshMatchesTheReference) {
  auto plain = json_of(testing::run_heddle(kRun + "5"), "plain");
  std::string dir = fresh_dir("reshard");
  ASSERT_EQ(testing::run_heddle(kRun + "3 --checkpoint " + dir).exit_code, 0);
  auto other = json_of(testing::run_heddle("run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --train "
                                           "--json --check --steps 5 --resume " +
                                           dir),
                       "reshard");
  if (plain.is_null() || other.is_null()) return;
  EXPECT_TRUE(other["ok"].get<bool>());
  ASSERT_EQ(other["loss"].size(), 2u);
  const double want = plain["loss"].back().get<double>(), got = other["loss"].back();
  EXPECT_NEAR(got, want, 1e-3 * std::abs(want) + 1e-4);
}

TEST(CheckpointCli, BadFlagsAndDamagedCheckpointsExitOne) {
  struct Case {
    std::string args, message;
  };
  std::string dir = fresh_dir("bad");
  ASSERT_EQ(testing::run_heddle(kRun + "2 --checkpoint " + dir).exit_code, 0);
  const std::string bin = dir + "/step-00000002/rank-0.bin";
  fs::resize_file(bin, fs::file_size(bin) - 8);
  const Case cases[] = {
      {"run gpt-tiny --checkpoint " + dir, "add --train"},
      {"run gpt-tiny --train --checkpoint-every 2", "--checkpoint-every needs --checkpoint"},
      {kRun + "3 --checkpoint " + dir + " --checkpoint-every 0", "must be >= 1"},
      {kRun + "3 --resume " + fresh_dir("none"), "holds no complete checkpoint"},
      {kRun + "3 --resume " + dir, bin},
      {kRun + "3 --resume " + dir, "truncated"},
      {kRun + "3 --lr 0.5 --resume " + dir, "manifest mismatch"},
  };
  for (const Case& c : cases) {
    CliResult r = testing::run_heddle(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_NE((r.out + r.err).find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace heddle
