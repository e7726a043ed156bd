// Cluster-grade MPI launches (issue 24): ranks started differently are refused before any work
// (MPMD launches with other seeds, steps or model files), a rank that fails alone says so itself
// and the others name it, `auto` is planned once by rank 0, a launch under mpirun without
// --backend runs as MPI, a peer in another PID namespace is not mistaken for a dead one, and each
// class of failure has its exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/RunMpi.h"

namespace heddle {
namespace {

using testing::count_of;
using testing::mpirun;
using testing::mpirun_apps;

std::string host() { return testing::host_name(); }

std::string prefix(int rank) {
  return "heddle: rank " + std::to_string(rank) + " (" + host() + ")";
}

TEST(MpiLaunch, RanksWithDifferentSeedsAreRefusedNamingTheRankAndWhat) {
  auto t = mpirun_apps(
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 --json --seed 1 : "
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 --json --seed 2",
      "", 1);
  EXPECT_EQ(t.r.exit_code, 1) << t.r.err;
  EXPECT_EQ(t.r.out.find("\"ok\""), std::string::npos) << "no result: " << t.r.out;
  for (int r : {0, 1}) {
    // --json: every record is a JSON line; rank r's failure names the arguments and rank 1.
    bool found = false;
    std::istringstream lines(t.r.err);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] != '{') continue;
      auto j = nlohmann::json::parse(line);
      if (j["event"] != "failure" || j["rank"] != r) continue;
      found = true;
      EXPECT_EQ(j["exit_code"], 1);
      EXPECT_EQ(j["host"], host());
      std::string m = j["message"];
      EXPECT_NE(m.find("the arguments: rank(s) 1 differ from rank 0"), std::string::npos) << m;
      EXPECT_NE(m.find("seed=" + std::to_string(r + 1)), std::string::npos) << m;
    }
    EXPECT_TRUE(found) << "rank " << r << " wrote no failure record:\n" << t.r.err;
  }
}

TEST(MpiLaunch, RanksWithDifferentStepCountsAreRefusedBeforeAnyStep) {
  auto t = mpirun_apps(
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 --train --steps 3 : "
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 --train --steps 5",
      "", 1);
  EXPECT_EQ(t.r.exit_code, 1) << t.r.err;
  EXPECT_EQ(t.r.out.find("loss"), std::string::npos) << "no step ran: " << t.r.out;
  EXPECT_NE(t.r.err.find(prefix(0) + ": error: the ranks were started differently"),
            std::string::npos)
      << t.r.err;
}

TEST(MpiLaunch, TheSameModelPathHoldingDifferentFilesIsRefused) {
  // Two "hosts": the same model at other paths is fine (paths are not compared, bytes are); a
  // different file is refused.
  const std::string dir = ::testing::TempDir() + "/mpi_launch_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir + "/a " + dir + "/b " + dir + "/c").c_str());
  const std::string src = std::string(HEDDLE_SOURCE_DIR) + "/examples/mlp.hd";
  std::system(("cp " + src + " " + dir + "/a/m.hd && cp " + src + " " + dir + "/b/m.hd").c_str());
  std::ifstream in(src);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir + "/c/m.hd") << text << "\n# another revision\n";
  auto same = mpirun_apps("-np 1 {heddle} run " + dir + "/a/m.hd --mesh 2 : -np 1 {heddle} run " +
                          dir + "/b/m.hd --mesh 2");
  EXPECT_EQ(same.r.exit_code, 0) << same.r.err;
  auto differ = mpirun_apps("-np 1 {heddle} run " + dir + "/a/m.hd --mesh 2 : -np 1 {heddle} run " +
                                dir + "/c/m.hd --mesh 2",
                            "", 1);
  EXPECT_EQ(differ.r.exit_code, 1);
  EXPECT_NE(differ.r.err.find("the model file: rank(s) 1 differ from rank 0"), std::string::npos)
      << differ.r.err;
}

TEST(MpiLaunch, ARankWhoseInputIsMissingSaysSoItselfAndTheOthersNameIt) {
  auto t = mpirun_apps(
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 : "
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 --input /nonexistent/x.npy",
      "", 1);
  EXPECT_EQ(t.r.exit_code, 1);
  EXPECT_NE(t.r.err.find(prefix(1) + ": /nonexistent/x.npy: error:"), std::string::npos) << t.r.err;
  EXPECT_NE(t.r.err.find(prefix(0) + ": error: rank(s) 1 failed to load their inputs"),
            std::string::npos)
      << t.r.err;
}

TEST(MpiLaunch, MpirunWithoutBackendRunsAsMpiAndThreadsIsRefused) {
  auto t = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --json");
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  auto j = nlohmann::json::parse(t.r.out);
  EXPECT_EQ(j["backend"], "mpi");
  EXPECT_EQ(j["devices"], 2);
  auto threads = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --backend threads", "", 1);
  EXPECT_EQ(threads.r.exit_code, 1);
  EXPECT_EQ(count_of(threads.r.err, "each would run the whole job"), 2u) << threads.r.err;
}

TEST(MpiLaunch, AutoIsPlannedByRankZeroForEveryRank) {
  // Two hosts calibrated differently (HEDDLE_CPU_PROFILE per app context): alone, one profile
  // makes the intra-op ILP keep communication low, the other shard for compute, so the plans
  // differ. Rank 0's plan runs on both: the result is rank 0's profile's, bit for bit.
  const std::string dir = ::testing::TempDir();
  const std::string slow_comm = dir + "/slow_comm.json", fast_comm = dir + "/fast_comm.json";
  std::ofstream(slow_comm) << R"({"device": {"peak_flops": 1e15, "memory_bytes": 1e12,)"
                              R"( "memory_bandwidth": 1e13}, "count": 2,)"
                              R"( "intra_node": {"bandwidth": 1e3}})";
  std::ofstream(fast_comm) << R"({"device": {"peak_flops": 1e6, "memory_bytes": 1e12,)"
                              R"( "memory_bandwidth": 1e6}, "count": 2,)"
                              R"( "intra_node": {"bandwidth": 1e15}})";
  const std::string args = "run mlp --mesh 2 --strategy auto --json";
  auto alone = [&](const std::string& profile) {
    setenv("HEDDLE_CPU_PROFILE", profile.c_str(), 1);
    auto t = testing::run_heddle(args);
    unsetenv("HEDDLE_CPU_PROFILE");
    EXPECT_EQ(t.exit_code, 0) << t.err;
    return t.exit_code == 0 ? nlohmann::json::parse(t.out)["output_digest"] : nlohmann::json();
  };
  auto d0 = alone(slow_comm), d1 = alone(fast_comm);
  ASSERT_NE(d0, d1) << "the profiles should lead to different plans";
  auto t = mpirun_apps("-np 1 env HEDDLE_CPU_PROFILE=" + slow_comm + " {heddle} " + args +
                       " : -np 1 env HEDDLE_CPU_PROFILE=" + fast_comm + " {heddle} " + args);
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_EQ(nlohmann::json::parse(t.r.out)["output_digest"], d0);
}

TEST(MpiLaunch, AStalledPeerInAnotherPidNamespaceIsNotTakenForDead) {
  if (std::system("unshare -p -f true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "unshare -p (PID namespaces) is not available here";
  // Rank 0 in a PID namespace of its own sees no process with rank 1's id; before, it declared
  // rank 1 dead after a second of waiting for it.
  auto t = mpirun_apps(
      "-np 1 unshare -p -f {heddle} run mlp --mesh 2 --strategy tp=2 --timeout 30 : -np 1 env "
      "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=stall:3 {heddle} run mlp --mesh 2 "
      "--strategy tp=2 --timeout 30");
  EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_GE(t.seconds, 3.0) << "rank 1 stalled for 3 s";
  EXPECT_EQ(t.r.err.find("process is gone"), std::string::npos) << t.r.err;
}

TEST(MpiLaunch, EachClassOfFailureHasItsExitCode) {
  // A hung peer: the timeout (4), naming the collective.
  // Only the ranks that stop by themselves speak here: mpirun's SIGKILL may follow in 1 s.
  auto hang = mpirun(2, "run mlp --mesh 2 --strategy tp=2 --timeout 2",
                     "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=hang", 1);
  EXPECT_EQ(hang.r.exit_code, 4) << hang.r.err;
  EXPECT_NE(hang.r.err.find("did not complete within 2 s"), std::string::npos) << hang.r.err;
  // An exception on a rank is an internal error (2); the peers name it.
  auto thrown = mpirun(2, "run mlp --mesh 2 --strategy tp=2", "HEDDLE_TEST_FAIL_RANK=1", 1);
  EXPECT_EQ(thrown.r.exit_code, 2) << thrown.r.err;
  EXPECT_NE(thrown.r.err.find(prefix(0) + ": error: rank 1 failed"), std::string::npos)
      << thrown.r.err;
  // A check beyond tolerance: 3, after every rank finished.
  auto check = mpirun(2, "run gpt-tiny --mesh 2 --strategy tp=2 --check --rtol 0 --atol 0", "", 1);
  EXPECT_EQ(check.r.exit_code, 3) << check.r.err;
  EXPECT_NE(check.r.err.find("outputs differ from the reference"), std::string::npos);
  // Numbers must be finite.
  auto nan = mpirun(2, "run mlp --mesh 2 --timeout nan", "", 1);
  EXPECT_EQ(nan.r.exit_code, 1);
  EXPECT_NE(nan.r.err.find("--timeout nan: give a finite number"), std::string::npos);
}

}  // namespace
}  // namespace heddle
