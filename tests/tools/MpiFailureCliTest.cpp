// Failures of MPI runs that must say what happened (docs/mpi.md, "Failure matrix"): a timeout
// names the rank that never arrived and where this rank last saw it, ranks that disagree at the
// completion agreement make no rank report success, SIGTERM leaves every rank's own record (exit
// 143) whatever mpirun itself returns, and --json streams progress records by default.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "common/RunMpi.h"

namespace heddle {
namespace {

using testing::mpirun;

std::string host() { return testing::host_name(); }

// The JSON records on stderr (other lines, such as mpirun's own, skipped; so are lines mpirun's
// forwarding cut or interleaved while it was being stopped: the failure record is then missing
// and the test says so).
std::vector<nlohmann::json> records(const std::string& err) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    // mpirun, stopped by a signal, may cut a record short and go on with the next one on the
    // same line: parse each record start on its own.
    for (size_t at = line.find("{\"time\""); at != std::string::npos;) {
      const size_t next = line.find("{\"time\"", at + 1);
      auto j = nlohmann::json::parse(line.substr(at, next == std::string::npos ? next : next - at),
                                     nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) out.push_back(std::move(j));
      at = next;
    }
  }
  return out;
}

// Rank `rank`'s failure record, or null.
nlohmann::json failure_of(const std::vector<nlohmann::json>& recs, int rank) {
  for (const auto& j : recs)
    if (j.value("event", "") == "failure" && j.value("rank", -1) == rank) return j;
  return {};
}

TEST(MpiFailure, ATimeoutNamesTheRankThatNeverArrivedAndWhereItWasLastSeen) {
  // mlp with tp=2 runs 24 collectives per training step (its slices of replicated tiles meet no
  // peer and are not counted): rank 1 hangs before its 26th, the 2nd of step 2, so rank 0 waits
  // alone in it. (The hung rank has nothing to say: mpirun may SIGKILL it 1 s after its SIGTERM.)
  auto t = mpirun(2, "run mlp --mesh 2 --strategy tp=2 --train --steps 3 --timeout 2 --json",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=hang HEDDLE_TEST_FAIL_AT=26", 1);
  EXPECT_EQ(t.r.exit_code, 4) << t.r.err;
  EXPECT_EQ(t.r.out.find("\"ok\""), std::string::npos) << t.r.out;
  auto f = failure_of(records(t.r.err), 0);
  ASSERT_FALSE(f.is_null()) << t.r.err;
  EXPECT_EQ(f["exit_code"], 4);
  const std::string m = f["message"];
  EXPECT_NE(m.find("over devices [0, 1] (#2 of step 2) did not complete within 2 s on rank 0"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("rank 1 (" + host() + ") never arrived"), std::string::npos) << m;
  EXPECT_NE(m.find("last seen"), std::string::npos) << m;
  EXPECT_NE(m.find("(#1 of step 2)"), std::string::npos) << "the last collective both did: " << m;
}

TEST(MpiFailure, ARankWaitingInAnotherCollectiveIsNamedWithIt) {
  // Rank 1 leaves out its collectives from the 26th (the 2nd of step 2) on and waits in the
  // agreement after the step, rank 0 in the collective: each times out, asks the other, and
  // names where it waits instead.
  auto t = mpirun(2, "run mlp --mesh 2 --strategy tp=2 --train --steps 3 --timeout 2 --json",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=skip HEDDLE_TEST_FAIL_AT=26", 1);
  EXPECT_EQ(t.r.exit_code, 4) << t.r.err;
  bool named = false;
  for (int r : {0, 1}) {
    auto f = failure_of(records(t.r.err), r);
    // The second to time out may be stopped by the first's abort before it asks.
    if (f.is_null() || f["exit_code"] != 4) continue;
    const std::string m = f["message"];
    const std::string other = "rank " + std::to_string(1 - r) + " (" + host() + ") is waiting in ";
    EXPECT_NE(m.find(other), std::string::npos) << m;
    EXPECT_NE(m.find(r == 0 ? "a reduction over all ranks (#1 of step 2) instead"
                            : "over devices [0, 1] (#2 of step 2) instead"),
              std::string::npos)
        << m;
    named = true;
  }
  EXPECT_TRUE(named) << t.r.err;
}

TEST(MpiFailure, AKilledRankIsNamedByTheSurvivorWhichExits5) {
  auto t = mpirun(2, "run mlp --mesh 2 --strategy tp=2 --train --steps 3 --json",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=kill HEDDLE_TEST_FAIL_AT=3", 3);
  // mpirun returns the first non-zero status it saw: the killed rank's, 128 + SIGKILL.
  EXPECT_EQ(t.r.exit_code, 137) << t.r.err;
  auto f = failure_of(records(t.r.err), 0);
  ASSERT_FALSE(f.is_null()) << t.r.err;
  EXPECT_EQ(f["exit_code"], 5);
  // It saw the process vanish while waiting, or mpirun's SIGTERM came first: either way it names
  // rank 1.
  EXPECT_NE(f["message"].get<std::string>().find("rank 1 failed"), std::string::npos) << f;
}

TEST(MpiFailure, AnotherHeddleBuildOnOneRankIsRefused) {
  // Another build: the same program with other bytes (a byte appended: still runnable).
  const std::string other = ::testing::TempDir() + "/heddle_other_" + std::to_string(getpid());
  ASSERT_EQ(
      std::system(
          ("cp " + testing::heddle_binary() + " " + other + " && printf x >> " + other).c_str()),
      0);
  auto t = testing::mpirun_apps(
      "-np 1 {heddle} run mlp --mesh 2 : -np 1 " + other + " run mlp --mesh 2", "", 1);
  std::remove(other.c_str());
  EXPECT_EQ(t.r.exit_code, 1) << t.r.err;
  EXPECT_EQ(
      testing::count_of(
          t.r.err, "the heddle binary (another build or version): rank(s) 1 differ from rank 0"),
      2u)
      << t.r.err;
}

TEST(MpiFailure, ARankDisagreeingAtCompletionMakesNoRankReportSuccess) {
  // The launch agreement compares --steps, so only a bug could make ranks disagree at the end:
  // rank 1 claims one step more at the completion agreement (test-only injection).
  auto t = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --train --steps 3 --json",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=disagree", 1);
  EXPECT_EQ(t.r.exit_code, 2) << t.r.err;
  EXPECT_EQ(t.r.out.find("\"ok\""), std::string::npos) << "no rank reports success: " << t.r.out;
  auto recs = records(t.r.err);
  auto f0 = failure_of(recs, 0), f1 = failure_of(recs, 1);
  ASSERT_FALSE(f0.is_null() || f1.is_null()) << t.r.err;
  EXPECT_EQ(f0["exit_code"], 2);
  EXPECT_EQ(f1["exit_code"], 2);
  EXPECT_NE(f0["message"].get<std::string>().find(
                "the ranks do not agree that the run completed: rank 1 ran 4 steps, this rank 3"),
            std::string::npos)
      << f0;
  EXPECT_NE(f1["message"].get<std::string>().find("rank 0 ran 3 steps, this rank 4"),
            std::string::npos)
      << f1;
  // --json streams progress by default: rank 0's three steps came before the refusal.
  int steps = 0;
  for (const auto& j : recs) steps += j.value("event", "") == "step" && j.value("rank", -1) == 0;
  EXPECT_EQ(steps, 3) << t.r.err;
}

TEST(MpiFailure, RanksWithDifferentStrategiesAreRefusedInsteadOfHanging) {
  // Before the launch agreement this hung 60 s, hit an assert or ended in MPI_ERR_TRUNCATE.
  auto t = testing::mpirun_apps(
      "-np 1 {heddle} run mlp --mesh 2 --strategy dp=2 : "
      "-np 1 {heddle} run mlp --mesh 2 --strategy tp=2",
      "", 1);
  EXPECT_EQ(t.r.exit_code, 1) << t.r.err;
  EXPECT_LT(t.seconds, 15);
  EXPECT_EQ(testing::count_of(t.r.err, "the arguments: rank(s) 1 differ from rank 0"), 2u)
      << t.r.err;
  EXPECT_NE(t.r.err.find("strategy=tp=2"), std::string::npos) << t.r.err;
}

// Starts `mpirun -np 2 heddle ARGS` in the background (stderr to `err_file`; mpirun's SIGKILL 3 s
// after its SIGTERM), waits until rank 0 logged its first step, sends SIGTERM to `target`
// ("mpirun": the launcher, as Ctrl-C or a job script's kill; "ranks": every rank, as Slurm's
// scancel signals every task), and returns mpirun's exit code.
int terminate_run(const std::string& args, const std::string& target, const std::string& err_file,
                  const std::string& signal = "TERM") {
  const std::string script = err_file + ".sh";
  std::ofstream(script) << testing::mpirun_prefix("", 3) << "-np 2 " << testing::heddle_binary()
                        << " " << args << " >/dev/null 2>" << err_file << " &\n"
                        << "pid=$!\n"
                        << "for i in $(seq 300); do grep -q '\"event\":\"step\"' " << err_file
                        << " && break; sleep 0.1; done\n"
                        << (target == "mpirun" ? "kill -" + signal + " $pid"
                            : target == "one"  ? "pkill -" + signal + " -n -P $pid"
                                               : "pkill -" + signal + " -P $pid")
                        << "\n"
                        << "wait $pid\necho $?\n";
  const testing::CliResult r = testing::run_shell("bash " + script);
  int rc = -1;
  if (std::sscanf(r.out.c_str(), "%d", &rc) != 1) rc = -1;
  std::remove(script.c_str());
  return rc;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Both ranks' failure records after SIGTERM went to `target` (terminate_run); mpirun's exit code.
int expect_sigterm_records(const std::string& target, const std::string& signal = "TERM") {
  const std::string args = "run mlp --mesh 2 --strategy dp=2 --train --steps 1000000 --json";
  const std::string err = ::testing::TempDir() + "/mpi_sigterm_" + std::to_string(getpid());
  const int rc = terminate_run(args, target, err, signal);
  const std::string text = slurp(err);
  std::remove(err.c_str());
  auto recs = records(text);
  for (int r : {0, 1}) {
    auto f = failure_of(recs, r);
    EXPECT_FALSE(f.is_null()) << target << ": rank " << r << " left no record\n" << text;
    if (f.is_null()) continue;
    EXPECT_EQ(f["signal"], "SIGTERM") << f;
    EXPECT_EQ(f["exit_code"], 143) << f;
    EXPECT_EQ(f["host"], host()) << f;
    EXPECT_NE(f["message"].get<std::string>().find("stopped by the launcher (SIGTERM"),
              std::string::npos)
        << f;
  }
  return rc;
}

TEST(MpiFailure, SigtermToMpirunLeavesEveryRanksRecordWith143WhileMpirunExits1) {
  // mpirun sets its own exit status to 1 as soon as it gets SIGTERM, before the ranks it stops
  // exit (docs/mpi.md): each rank's record is where 143 shows.
  EXPECT_EQ(expect_sigterm_records("mpirun"), 1);
}

TEST(MpiFailure, CtrlCOnMpirunStopsEveryRankWithSigterm) {
  // mpirun turns its SIGINT into SIGTERM for the ranks (Open MPI's "Signal Propagation").
  EXPECT_EQ(expect_sigterm_records("mpirun", "INT"), 1);
}

TEST(MpiFailure, SigtermToEveryRankAsSlurmSendsItMakesMpirunExit143) {
  // Slurm's scancel and preemption signal every task: mpirun then returns the lowest rank's own
  // exit status.
  EXPECT_EQ(expect_sigterm_records("ranks"), 143);
}

// Both ranks' failure messages after SIGINT went to `target` (terminate_run: "ranks" or "one"),
// having checked that mpirun and every rank exit 130 and say they were stopped by a signal.
std::vector<std::string> expect_sigint_stops(const std::string& target) {
  const std::string err =
      ::testing::TempDir() + "/mpi_sigint_" + target + "_" + std::to_string(getpid());
  const int rc = terminate_run("run mlp --mesh 2 --strategy dp=2 --train --steps 1000000 --json",
                               target, err, "INT");
  const std::string text = slurp(err);
  std::remove(err.c_str());
  EXPECT_EQ(rc, 130) << text;
  auto recs = records(text);
  std::vector<std::string> messages;
  for (int r : {0, 1}) {
    auto f = failure_of(recs, r);
    EXPECT_FALSE(f.is_null()) << "rank " << r << " left no record\n" << text;
    messages.push_back(f.is_null() ? "" : f["message"].get<std::string>());
    if (f.is_null()) continue;
    EXPECT_EQ(f["exit_code"], 130) << f;
    EXPECT_NE(messages.back().find("stopped by a signal"), std::string::npos) << f;
  }
  return messages;
}

TEST(MpiFailure, SigintToEveryRankStopsEachWith130) {
  // srun forwards Ctrl-C to every task as SIGINT: the ranks agree to stop after the step, and each
  // says it was stopped (before, every rank but the lowest blamed it and exited 5).
  expect_sigint_stops("ranks");
}

TEST(MpiFailure, SigintToOneRankStopsEveryRankWith130AndTheOthersNameIt) {
  // A stop asked of one rank (a signal to one task, or the first of srun's signals to arrive) is
  // a stop of the job, not a failure: every rank exits 130, the others naming the signalled one.
  const std::vector<std::string> messages = expect_sigint_stops("one");
  int named = 0;
  for (int r : {0, 1})
    named += messages[r].find("stopped by a signal to rank " + std::to_string(1 - r)) !=
             std::string::npos;
  EXPECT_EQ(named, 1) << messages[0] << "\n" << messages[1];
}

TEST(MpiFailure, EachRankRunsOneBlasThreadUnlessTheUserSetsIt) {
  // Before, OpenBLAS started one thread per core in every rank. The launch here sets no BLAS
  // variable (RunMpi.h's does), then sets OPENBLAS_NUM_THREADS=2 for the ranks; --bind-to none,
  // as when oversubscribed, lets OpenBLAS see every core (it counts the CPUs a rank is bound to).
  auto threads_of = [](const std::string& env) {
    auto t = testing::run_timed("env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS " + env +
                                " mpirun --oversubscribe --allow-run-as-root --mca btl self,vader "
                                "--mca btl_vader_single_copy_mechanism none --bind-to none -np 2 " +
                                testing::heddle_binary() + " run mlp --mesh 2 --json");
    EXPECT_EQ(t.r.exit_code, 0) << t.r.err;
    std::vector<int> per_rank(2, -1);
    for (const auto& j : records(t.r.err))
      if (j.value("event", "") == "blas") per_rank[j["rank"].get<size_t>()] = j["threads"];
    return per_rank;
  };
  EXPECT_EQ(threads_of(""), std::vector<int>({1, 1}));
  EXPECT_EQ(threads_of("OPENBLAS_NUM_THREADS=2"), std::vector<int>({2, 2}));
}

TEST(MpiFailure, JsonStreamsProgressByDefaultAndLogLevelSilencesIt) {
  auto count_steps = [](const std::string& err) {
    int n = 0;
    for (const auto& j : records(err)) n += j.value("event", "") == "step";
    return n;
  };
  auto on = testing::run_heddle("run mlp --train --steps 3 --json");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_EQ(count_steps(on.err), 3) << on.err;
  EXPECT_NO_THROW(nlohmann::json::parse(on.out)) << "stdout holds only the result";
  auto quiet = testing::run_heddle("run mlp --train --steps 3 --json --log-level warn");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;
  auto ranks = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --train --steps 3 --json");
  ASSERT_EQ(ranks.r.exit_code, 0) << ranks.r.err;
  EXPECT_EQ(count_steps(ranks.r.err), 3) << ranks.r.err;
  EXPECT_TRUE(nlohmann::json::parse(ranks.r.out)["ok"].get<bool>());
}

}  // namespace
}  // namespace heddle
