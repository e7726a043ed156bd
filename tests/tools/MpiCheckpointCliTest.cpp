// Checkpoint and resume on the MPI backend (4 ranks, dp=2,tp=2, loopback): params_digest equals
// the threads backend's; ranks SIGKILLed at seeded random collectives (random steps) or during a
// checkpoint write, then resumed, end with parameters bit-identical to the uninterrupted run; a
// checkpoint of 4 ranks resumes on 2 (dp=2) within the reference's tolerance; pipelines resume
// bit-identical; each rank reads only the shards holding its tiles. Kills use the
// test-only HEDDLE_TEST_FAIL_* and HEDDLE_TEST_CHECKPOINT_KILL variables. The full 20-kill run
// is bench/fault_resume.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/RunMpi.h"

namespace heddle {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;

const int kSteps = 6;
const std::string kArgs = "run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --train --json --steps ";

nlohmann::json json_of(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out);
}

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/mpi_ckpt_" + name;
  fs::remove_all(d);
  return d;
}

// The uninterrupted run on threads (the MPI backend equals it bit for bit).
nlohmann::json uninterrupted() {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  return json_of(testing::run_heddle(kArgs + std::to_string(kSteps)), "threads");
}

// One launch of the 4 ranks with checkpoints in `dir`, resuming when it holds one, with `env`
// (fault injection); survivors of a kill are ended 1 s after it.
testing::Timed launch(const std::string& dir, const std::string& env) {
  std::string args = kArgs + std::to_string(kSteps) + " --backend mpi --checkpoint " + dir;
  if (fs::exists(dir + "/latest")) args += " --resume " + dir;
  return testing::mpirun(4, args, env, 1);
}

// The final launch, without faults: what it reports, and that it resumed after `from`.
nlohmann::json finish(const std::string& dir) {
  auto t = launch(dir, "");
  return json_of(t.r, "final resume");
}

TEST(MpiCheckpointCli, ParamsDigestEqualsTheThreadedBackends) {
  auto plain = uninterrupted();
  ASSERT_FALSE(plain.is_null());
  auto mpi = json_of(testing::mpirun(4, kArgs + std::to_string(kSteps) + " --backend mpi", "", 1).r,
                     "mpi");
  ASSERT_FALSE(mpi.is_null());
  EXPECT_EQ(mpi["params_digest"].get<std::string>().size(), 16u);
  EXPECT_EQ(mpi["params_digest"], plain["params_digest"]) << "mpi differs from threads";
}

TEST(MpiCheckpointCli, RanksKilledAtRandomStepsResumeBitIdentical) {
  auto plain = uninterrupted();
  ASSERT_FALSE(plain.is_null());
  // Collectives one rank runs over the whole run, about (the threads backend counts them over
  // the 4 devices as MPI does): kills land in its first half.
  const int64_t per_run = plain["collectives"].get<int64_t>() / 4 * kSteps;
  std::mt19937 rng(21);
  std::string dir = fresh_dir("random");
  for (int kill = 0; kill < 2; ++kill) {
    const int64_t rank = std::uniform_int_distribution<int64_t>(0, 3)(rng);
    const int64_t at = std::uniform_int_distribution<int64_t>(1, per_run / 2)(rng);
    auto t =
        launch(dir, "HEDDLE_TEST_FAIL_MODE=kill HEDDLE_TEST_FAIL_RANK=" + std::to_string(rank) +
                        " HEDDLE_TEST_FAIL_AT=" + std::to_string(at));
    EXPECT_NE(t.r.exit_code, 0) << "rank " << rank << " at " << at << "\n" << t.r.err;
  }
  auto done = finish(dir);
  ASSERT_FALSE(done.is_null());
  EXPECT_LT(done["loss"].size(), static_cast<size_t>(kSteps));  // it resumed
  EXPECT_EQ(done["params_digest"], plain["params_digest"]);
}

TEST(MpiCheckpointCli, RanksKilledDuringCheckpointWritesResumeBitIdentical) {
  auto plain = uninterrupted();
  ASSERT_FALSE(plain.is_null());
  std::string dir = fresh_dir("writes");
  // Rank 2 in its second write, its shard not yet renamed: step 1 survives. Then rank 0 between
  // the manifest and `latest` of its first write after resuming (step 2): step 1 still.
  for (const char* kill : {"2:2:shard", "0:1:latest"}) {
    auto t = launch(dir, std::string("HEDDLE_TEST_CHECKPOINT_KILL=") + kill);
    EXPECT_NE(t.r.exit_code, 0) << kill << "\n" << t.r.err;
    std::ifstream latest(dir + "/latest");
    std::string name;
    latest >> name;
    EXPECT_EQ(name, "step-00000001") << kill;
  }
  auto done = finish(dir);
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["loss"].size(), static_cast<size_t>(kSteps - 1));
  EXPECT_EQ(done["params_digest"], plain["params_digest"]);
}

// 4 ranks (dp=2,tp=2) write 3 steps; 2 ranks (dp=2) resume: resharded, the run matches the
// single-device reference from the checkpoint and ends near the uninterrupted 4-rank run.
TEST(MpiCheckpointCli, FourRankCheckpointResumesOnTwoRanks) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  auto plain = json_of(testing::run_heddle(kArgs + "5"), "threads");
  std::string dir = fresh_dir("reshard");
  auto four = testing::mpirun(4, kArgs + "3 --backend mpi --checkpoint " + dir, "", 1);
  ASSERT_EQ(four.r.exit_code, 0) << four.r.err;
  EXPECT_TRUE(fs::exists(dir + "/step-00000003/rank-3.bin"));
  auto two = json_of(testing::mpirun(2,
                                     "run gpt-tiny --mesh 2 --strategy dp=2 --train --json --check "
                                     "--steps 5 --backend mpi --resume " +
                                         dir,
                                     "", 1)
                         .r,
                     "two ranks");
  if (plain.is_null() || two.is_null()) return;
  EXPECT_TRUE(two["ok"].get<bool>());
  ASSERT_EQ(two["loss"].size(), 2u);
  const double want = plain["loss"].back().get<double>(), got = two["loss"].back();
  EXPECT_NEAR(got, want, 1e-3 * std::abs(want) + 1e-4);
}

// A pipeline (pp=2 on 2 ranks) checkpoints and resumes like the threads backend's: rank 1 killed
// in its third write (its shard not yet renamed) leaves step 2 the latest; the resumed run ends
// bit-identical to the uninterrupted one, each rank reading only its own stage's shard.
TEST(MpiCheckpointCli, PipelineRanksResumeBitIdentical) {
  const std::string run =
      "run gpt-tiny --mesh 2 --strategy pp=2 --train --json --backend mpi "
      "--steps 4";
  auto plain = json_of(testing::mpirun(2, run, "", 1).r, "uninterrupted");
  ASSERT_FALSE(plain.is_null());
  std::string dir = fresh_dir("pipeline");
  auto killed =
      testing::mpirun(2, run + " --checkpoint " + dir, "HEDDLE_TEST_CHECKPOINT_KILL=1:3:shard", 1);
  EXPECT_NE(killed.r.exit_code, 0) << killed.r.err;
  std::ifstream latest(dir + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-00000002");
  auto t = testing::mpirun(
      2, run + " --checkpoint " + dir + " --resume " + dir + " --log-level info", "", 1);
  auto done = json_of(t.r, "resumed pipeline");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(done["loss"].size(), 2u);
  EXPECT_EQ(done["params_digest"], plain["params_digest"]);
  EXPECT_EQ(testing::count_of(t.r.err, "\"shards\":1,"), 2u) << t.r.err;
}

// Each rank reads only the shard files holding tiles it feeds, also when resharding: a dp=2
// checkpoint (each rank's shard whole) resumed with tp=2 reads one shard per rank, and ends
// bit-identical to the threads backend resuming the same checkpoint (which reads it whole).
TEST(MpiCheckpointCli, EachRankReadsOnlyTheShardsHoldingItsTiles) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string dir = fresh_dir("partial");
  const std::string run = "run gpt-tiny --mesh 2 --train --json --steps ";
  ASSERT_EQ(testing::mpirun(2, run + "2 --strategy dp=2 --backend mpi --checkpoint " + dir, "", 1)
                .r.exit_code,
            0);
  const std::string resume = run + "4 --strategy tp=2 --resume " + dir;
  auto t = testing::mpirun(2, resume + " --backend mpi --log-level info", "", 1);
  auto mpi = json_of(t.r, "mpi resume");
  auto threads = json_of(testing::run_heddle(resume), "threads resume");
  if (mpi.is_null() || threads.is_null()) return;
  EXPECT_EQ(testing::count_of(t.r.err, "\"shards\":1,"), 2u) << t.r.err;
  EXPECT_EQ(mpi["loss"].size(), 2u);
  EXPECT_EQ(mpi["params_digest"], threads["params_digest"]);
}

// Causal load balancing (the default with cp > 1) and checkpoints: a zigzag run on threads saves
// them in the sequence's order; ranks resuming in zigzag order read the sequence's tensors whole
// and permute them, and end bit-identical to the uninterrupted run. Writing checkpoints under MPI
// runs the contiguous split (the ranks' tiles would be in zigzag order); asking for zigzag then
// says so.
TEST(MpiCheckpointCli, ZigzagRunsResumeFromCheckpointsOnRanks) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const std::string dir = fresh_dir("zigzag");
  const std::string run = "run gpt-tiny --mesh 4 --strategy cp=2,dp=2 --train --json --steps ";
  auto plain = json_of(testing::run_heddle(run + "4"), "threads");
  ASSERT_EQ(testing::run_heddle(run + "2 --checkpoint " + dir).exit_code, 0);
  auto mpi =
      json_of(testing::mpirun(4, run + "4 --backend mpi --resume " + dir, "", 1).r, "mpi resume");
  if (plain.is_null() || mpi.is_null()) return;
  EXPECT_EQ(mpi["loss"].size(), 2u);
  EXPECT_EQ(mpi["params_digest"], plain["params_digest"]);
  auto asked = testing::mpirun(4,
                               "run gpt-tiny --mesh 4 --strategy cp=2,dp=2,cp_layout=zigzag "
                               "--train --steps 1 --backend mpi --checkpoint " +
                                   dir,
                               "", 1);
  EXPECT_EQ(asked.r.exit_code, 1);
  EXPECT_NE(asked.r.err.find("cp_layout=zigzag: checkpoints written under MPI"), std::string::npos)
      << asked.r.err;
}

// Ranks given different checkpoints (two directories, as on hosts without a shared filesystem)
// refuse to start: every rank names the part that differs.
TEST(MpiCheckpointCli, RanksResumingFromDifferentCheckpointsRefuse) {
  const std::string a = fresh_dir("agree_a"), b = fresh_dir("agree_b");
  const std::string run = "run gpt-tiny --mesh 2 --strategy dp=2 --train --backend mpi --steps ";
  ASSERT_EQ(testing::mpirun(2, run + "2 --checkpoint " + a, "", 1).r.exit_code, 0);
  ASSERT_EQ(testing::mpirun(2, run + "1 --checkpoint " + b, "", 1).r.exit_code, 0);
  auto t = testing::mpirun_apps(
      "-np 1 {heddle} " + run + "4 --resume " + a + " : -np 1 {heddle} " + run + "4 --resume " + b,
      "", 1);
  EXPECT_EQ(t.r.exit_code, 1) << t.r.err;
  EXPECT_EQ(testing::count_of(t.r.err, "the checkpoint resumed: rank(s) 1 differ"), 2u) << t.r.err;
}

}  // namespace
}  // namespace heddle
