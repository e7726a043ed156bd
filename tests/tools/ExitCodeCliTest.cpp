// Exit codes per class of failure (docs/cli.md), signals, the JSON-lines log, and outputs that are
// written whole or not at all (a kill or a full disk during --output keeps the previous file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `heddle ARGS` in the background, sent `signal` after `after_s` seconds; the exit code and the
// seconds from the signal to the exit.
std::pair<int, double> signalled(const std::string& args, const char* signal, double after_s) {
  std::string cmd = testing::heddle_binary() + " " + args + " >/dev/null 2>&1 & pid=$!; sleep " +
                    std::to_string(after_s) + "; kill -" + signal +
                    " $pid; t0=$(date +%s.%N); wait $pid; rc=$?; echo $rc $(date +%s.%N) $t0";
  const testing::CliResult r = testing::run_shell("bash -c '" + cmd + "'");
  int rc = -1;
  double t1 = 0, t0 = 0;
  if (std::sscanf(r.out.c_str(), "%d %lf %lf", &rc, &t1, &t0) != 3) rc = -1;
  return {rc, t1 - t0};
}

const char* kLongSearch =
    "plan megatron-1t --layers 512 --cluster a100x4096 --train --batch 4096 --time-limit 100";

TEST(ExitCodeCli, SigintExits130AndSigtermExits143WithinASecond) {
  auto [intr, intr_s] = signalled(kLongSearch, "INT", 1.5);
  EXPECT_EQ(intr, 130);
  EXPECT_LT(intr_s, 1.5);
  auto [term, term_s] = signalled(kLongSearch, "TERM", 1.5);
  EXPECT_EQ(term, 143);
  EXPECT_LT(term_s, 1.5);
}

TEST(ExitCodeCli, NonFiniteNumbersAreRefused) {
  for (std::string args : {"run mlp --timeout nan", "run mlp --lr inf",
                           "plan gpt-tiny --cluster a100x8 --time-limit -inf"}) {
    auto r = run_heddle(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find("give a finite number"), std::string::npos) << args << ": " << r.err;
  }
}

TEST(ExitCodeCli, ACheckMismatchExits3) {
  auto r = run_heddle("run gpt-tiny --mesh 2 --strategy tp=2 --check --rtol 0 --atol 0");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("outputs differ from the reference beyond tolerance"), std::string::npos);
  EXPECT_EQ(run_heddle("run gpt-tiny --mesh 2 --strategy tp=2 --check").exit_code, 0);
}

TEST(ExitCodeCli, JsonRunsStreamProgressAndFailureRecordsOnStderr) {
  auto ok = run_heddle("run mlp --train --steps 3 --json --log-level info");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  int steps = 0;
  std::istringstream lines(ok.err);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);  // every stderr line is a JSON record
    EXPECT_TRUE(j.contains("time")) << line;
    if (j["event"] == "step") ++steps;
  }
  EXPECT_EQ(steps, 3);
  // Millisecond steps: every one of the first ten, then at most five records a second.
  auto many = run_heddle("run mlp --train --steps 300 --json --log-level info");
  ASSERT_EQ(many.exit_code, 0) << many.err;
  std::vector<int> logged;
  std::istringstream more(many.err);
  for (std::string line; std::getline(more, line);)
    if (auto j = nlohmann::json::parse(line); j["event"] == "step")
      logged.push_back(j["step"].get<int>());
  ASSERT_GE(logged.size(), 10u);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(logged[static_cast<size_t>(k)], k + 1);
  EXPECT_LT(logged.size(), 300u) << "every step of a millisecond-step run was logged";
  auto bad = run_heddle("run no-such-model --json");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(bad.out.empty());
  auto j = nlohmann::json::parse(bad.err.substr(0, bad.err.find('\n')));
  EXPECT_EQ(j["event"], "failure");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_NE(j["message"].get<std::string>().find("no-such-model"), std::string::npos);
}

TEST(ExitCodeCli, AKillOrAFullDiskDuringOutputKeepsThePreviousFile) {
  const std::string dir = ::testing::TempDir() + "/exit_output_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/out.npy";
  const std::string args = "run gpt-tiny --output " + out;
  ASSERT_EQ(run_heddle(args).exit_code, 0);
  const std::string good = slurp(out);
  ASSERT_GT(good.size(), 16u * 1024) << "the output must outgrow the file-size limit below";
  // A file-size limit of 16 KiB (bash counts 1024-byte blocks): the kernel kills the process
  // (SIGXFSZ) in the middle of the write, as a kill would.
  testing::run_shell("bash -c 'ulimit -f 16; exec " + testing::heddle_binary() +
                     " run gpt-tiny --seed 7 " + "--output " + out + "' >/dev/null");
  EXPECT_EQ(slurp(out), good) << "the previous output survives a kill during the write";
  // The same limit with SIGXFSZ ignored: the write fails as on a full disk; the message gives the
  // system's reason and nothing is left behind.
  const testing::CliResult full =
      testing::run_shell("bash -c 'trap \"\" XFSZ; ulimit -f 16; exec " + testing::heddle_binary() +
                         " run gpt-tiny --seed 7 --output " + out + "' >/dev/null");
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.err;
  EXPECT_EQ(slurp(out), good);
  size_t temporaries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++temporaries;
  EXPECT_LE(temporaries, 1u) << "only the killed process's temporary may remain";
}

TEST(ExitCodeCli, UnwritableOutputsAreRefusedBeforeAnyWork) {
  auto t0 = std::chrono::steady_clock::now();
  auto plan = run_heddle(std::string(kLongSearch) + " --out /nonexistent/dir/plan");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_NE(plan.err.find("does not exist"), std::string::npos) << plan.err;
  EXPECT_LT(s, 5) << "refused before the search";
  auto run = run_heddle("run gpt-tiny --steps 3 --output /nonexistent/out.npy");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--output"), std::string::npos) << run.err;
  auto train = run_heddle("run mlp --train --output /tmp/x.npy");
  EXPECT_EQ(train.exit_code, 1);
  EXPECT_NE(train.err.find("Drop --output, or --train"), std::string::npos) << train.err;
  EXPECT_EQ(train.out.find("loss"), std::string::npos) << "refused before any step";
}

}  // namespace
}  // namespace heddle
