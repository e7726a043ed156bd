// `heddle run --backend mpi` under mpirun on loopback: 2 and 4 ranks give the threaded executor's
// outputs and training losses bit for bit (and the reference's within tolerance), reruns are
// bit-identical, a rank
// that throws, is killed or hangs stops every rank within 30 s naming it, bad input is reported
// by every rank with its prefix. Fault injection uses the test-only HEDDLE_TEST_FAIL_*
// variables (heddle/runtime/MpiRun.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/RunMpi.h"

namespace heddle {
namespace {

using testing::CliResult;

std::string host() { return testing::host_name(); }

using testing::mpirun;
using testing::Timed;

size_t count(const std::string& s, const std::string& what) { return testing::count_of(s, what); }

nlohmann::json json_of(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
  if (r.exit_code != 0) return {};
  return nlohmann::json::parse(r.out);
}

struct Case {
  int ranks;
  const char* args;
};

TEST(MpiCli, RanksGiveTheThreadedResultsBitForBitAndMatchTheReference) {
  const Case cases[] = {
      {2, "mlp --mesh 2 --strategy tp=2"},
      {2, "gpt-tiny --mesh 2 --strategy dp=2,zero=3"},
      {2, "llama-tiny --mesh 2 --strategy tp=2,sp=on"},
      {4, "gpt-tiny --mesh 4 --strategy dp=2,tp=2"},
      {4, "moe-tiny --mesh 4 --strategy dp=2,tp=2"},
      {4, "moe-tiny --mesh 4 --strategy dp=2,ep=2"},
  };
  // BLAS sums in a different order with more threads; both backends use one per device.
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  for (const auto& c : cases) {
    std::string args = std::string("run ") + c.args + " --check --json";
    auto threads = testing::run_heddle(args);
    auto mpi = mpirun(c.ranks, args + " --backend mpi");
    auto jt = json_of(threads, args);
    auto jm = json_of(mpi.r, args + " (mpi)");
    if (jt.is_null() || jm.is_null()) continue;
    EXPECT_TRUE(jm["ok"].get<bool>()) << args;
    EXPECT_LT(jm["max_abs_error"].get<double>(), 1e-4) << args;
    EXPECT_EQ(jm["devices"].get<int64_t>(), c.ranks) << args;
    EXPECT_EQ(jm["backend"], "mpi") << args;
    EXPECT_GT(jm["collectives"].get<int64_t>(), 0) << args;
    EXPECT_EQ(jm["output_digest"], jt["output_digest"]) << args << ": mpi differs from threads";
    // Each rank generated only its shards: with tensor parallelism no rank holds every weight.
    EXPECT_LT(jm["rank_feed_bytes_max"].get<int64_t>(), jm["model_feed_bytes"].get<int64_t>())
        << args;
  }
}

// Tactics on ranks: under `auto` rank 0's ILP plan is shared and every rank derives where the
// tactics start values; in a pipeline every stage pins them. Both train to the reference.
TEST(MpiCli, TacticsUnderAutoAndPipelinesMatchTheReference) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const std::string bn = std::string(HEDDLE_SOURCE_DIR) + "/examples/batchnorm.hd";
  for (const std::string strategy :
       {"--mesh tp=4 --strategy auto --tactic %y:n=tp", "--mesh 4 --strategy pp=2,tp=2"}) {
    std::string args = "run " + bn + " " + strategy +
                       " --tactic %img:1=tp --train --steps 2 --check --json --backend mpi";
    auto j = json_of(mpirun(4, args).r, args);
    if (j.is_null()) continue;
    EXPECT_TRUE(j["ok"].get<bool>()) << args;
  }
}

TEST(MpiCli, TrainingStepsEqualTheThreadedBackendBitForBit) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string args = "run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --train --steps 3 --json";
  const std::string dt = ::testing::TempDir() + "/mpi_emit_threads",
                    dm = ::testing::TempDir() + "/mpi_emit_ranks";
  auto jt = json_of(testing::run_heddle(args + " --emit " + dt), args);
  auto jm = json_of(mpirun(4, args + " --backend mpi --emit " + dm).r, args + " (mpi)");
  if (jt.is_null() || jm.is_null()) return;
  auto loss = jm["loss"].get<std::vector<double>>();
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_LT(loss[2], loss[0]) << "the loss falls";
  EXPECT_EQ(jm["loss"], jt["loss"]);
  // The last step's outputs: the loss and every updated parameter and optimizer state.
  EXPECT_EQ(jm["output_digest"], jt["output_digest"]);
  // Rank 0 counts and writes every device's program from the shared template, one at a time;
  // the threads backend lowers them all at once. The text is the same but for the ranks'
  // trailing all-gathers that make the sharded outputs whole on every rank (the threads
  // assemble those outputs from the devices' tiles in shared memory).
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  int64_t gathers = 0;
  for (int d = 0; d < 4; ++d) {
    std::string name = "/device" + std::to_string(d) + ".txt";
    const std::string threads = slurp(dt + name), ranks = slurp(dm + name);
    EXPECT_GT(threads.size(), 100u) << d;
    ASSERT_EQ(ranks.compare(0, threads.size(), threads), 0) << d;
    std::istringstream rest(ranks.substr(threads.size()));
    for (std::string line; std::getline(rest, line); ++gathers)
      EXPECT_EQ(line.rfind("all-gather ", 0), 0u) << d << ": " << line;
  }
  EXPECT_GT(gathers, 0);
  EXPECT_EQ(jm["collectives"].get<int64_t>(), jt["collectives"].get<int64_t>() + gathers);
}

// Two training steps of `model` under `strategy` on 4 MPI ranks pass --check and equal the
// threads' run bit for bit.
void expect_four_ranks_like_threads(const std::string& strategy,
                                    const std::string& model = "gpt-tiny") {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string args =
      "run " + model + " --mesh 4 --strategy " + strategy + " --train --steps 2 --check --json";
  auto jt = json_of(testing::run_heddle(args), args);
  auto jm = json_of(mpirun(4, args + " --backend mpi").r, args + " (mpi)");
  if (jt.is_null() || jm.is_null()) return;
  EXPECT_TRUE(jm["ok"].get<bool>()) << args;
  EXPECT_EQ(jm["devices"].get<int64_t>(), 4) << args;
  EXPECT_EQ(jm["loss"], jt["loss"]) << args;
  EXPECT_EQ(jm["output_digest"], jt["output_digest"]) << args << ": mpi differs from threads";
}

TEST(MpiCli, ContextParallelTrainingOnFourRanksMatchesTheReferenceAndTheThreads) {
  for (std::string strategy : {"cp=2,dp=2,cp_comm=allgather", "cp=2,tp=2"})
    expect_four_ranks_like_threads(strategy);
}

// Ring attention's steps are MPI point-to-point messages (sharding.md, "Ring attention"); the
// default with cp > 1.
TEST(MpiCli, RingAttentionOnFourRanksMatchesTheReferenceAndTheThreads) {
  for (std::string strategy : {"cp=2,dp=2,cp_comm=ring", "cp=4"})
    expect_four_ranks_like_threads(strategy);
}

// Causal load balancing (the default with cp > 1; sharding.md, "Causal load balancing"): each
// rank cuts its tiles of the sequence permuted into zigzag order and the outputs come back in
// order; llama's rotary embeddings read the permuted positions. The contiguous split too.
TEST(MpiCli, ZigzagAndContiguousSplitsOnFourRanksMatchTheReferenceAndTheThreads) {
  expect_four_ranks_like_threads("cp=2,tp=2,sp=on", "llama-tiny");
  expect_four_ranks_like_threads("cp=4,cp_layout=contiguous");
}

TEST(MpiCli, TrainingStepsMatchTheReferenceEveryStep) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string args = "run mlp --mesh 2 --strategy dp=2 --train --steps 2 --check --json";
  auto jm = json_of(mpirun(2, args + " --backend mpi").r, args + " (mpi)");
  if (jm.is_null()) return;
  EXPECT_TRUE(jm["ok"].get<bool>());
  EXPECT_EQ(jm["loss"].get<std::vector<double>>().size(), 2u);
}

// Data-parallel ranks compute each updated parameter and optimizer state into a spare buffer
// of its feed from the second step on and swap the two: four steps (the buffers trade places
// three times) pass --check at every step and equal the threads' run bit for bit.
TEST(MpiCli, DataParallelRanksSwappingUpdatedFeedsEqualTheThreadsEveryStep) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  for (std::string model : {"gpt-tiny", "moe-tiny"}) {
    std::string args =
        "run " + model + " --mesh 2 --strategy dp=2 --train --steps 4 --check --json";
    auto jt = json_of(testing::run_heddle(args), args);
    auto jm = json_of(mpirun(2, args + " --backend mpi").r, args + " (mpi)");
    if (jt.is_null() || jm.is_null()) return;
    EXPECT_TRUE(jm["ok"].get<bool>()) << args;
    EXPECT_EQ(jm["loss"], jt["loss"]) << args;
    EXPECT_EQ(jm["output_digest"], jt["output_digest"]) << args;
    EXPECT_EQ(jm["params_digest"], jt["params_digest"]) << args;
  }
}

TEST(MpiCli, APipelineTrainingStepOnFourRanksMatchesTheReferenceAndTheThreads) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  for (std::string schedule : {"1f1b", "zb-h1"}) {
    std::string args = "run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,dp=2,schedule=" + schedule +
                       " --train --steps 2 --check --json";
    auto jt = json_of(testing::run_heddle(args), args);
    auto jm = json_of(mpirun(4, args + " --backend mpi").r, args + " (mpi)");
    if (jt.is_null() || jm.is_null()) return;
    EXPECT_TRUE(jm["ok"].get<bool>()) << jm.dump();
    EXPECT_EQ(jm["devices"].get<int64_t>(), 4);
    EXPECT_EQ(jm["pipeline"]["micro_batches"].get<int64_t>(), 2) << "batch 4 over dp=2, mb=1";
    EXPECT_EQ(jm["pipeline"]["schedule"], schedule);
    EXPECT_EQ(jm["loss"], jt["loss"]) << "the same pipeline on ranks and on threads";
    EXPECT_EQ(jm["output_digest"], jt["output_digest"]);
  }
}

TEST(MpiCli, APipelineRankMaterialisesOnlyItsShardOfItsStage) {
  // pp=2 gives each rank half the model, tp=2 half of that: a rank generates about a quarter of
  // the parameters, optimizer state and inputs (norms and some biases stay whole), not its whole
  // stage, and the training steps still match the reference and the threads.
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string args =
      "run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,tp=2 --train --steps 2 --check --json";
  auto jt = json_of(testing::run_heddle(args), args);
  auto jm = json_of(mpirun(4, args + " --backend mpi").r, args + " (mpi)");
  if (jt.is_null() || jm.is_null()) return;
  EXPECT_TRUE(jm["ok"].get<bool>()) << jm.dump();
  EXPECT_EQ(jm["loss"], jt["loss"]);
  EXPECT_EQ(jm["output_digest"], jt["output_digest"]);
  double share = static_cast<double>(jm["rank_feed_bytes_max"].get<int64_t>()) /
                 static_cast<double>(jm["model_feed_bytes"].get<int64_t>());
  EXPECT_GT(share, 0.2) << jm.dump();
  EXPECT_LT(share, 0.3) << "a rank holds more than its quarter: " << jm.dump();
}

TEST(MpiCli, TwoRunsAreBitIdenticalAndTheSeedMatters) {
  std::string args = "run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --backend mpi --json";
  auto a = json_of(mpirun(4, args).r, args);
  auto b = json_of(mpirun(4, args).r, args);
  auto c = json_of(mpirun(4, args + " --seed 5").r, args + " --seed 5");
  EXPECT_EQ(a["output_digest"], b["output_digest"]);
  EXPECT_NE(a["output_digest"], c["output_digest"]);
}

TEST(MpiCli, TextSummaryComesOnceFromRankZero) {
  auto t = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --backend mpi --check");
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  EXPECT_EQ(count(t.r.out, "check      ok"), 1u) << t.r.out;
  EXPECT_NE(t.r.out.find("2 MPI ranks"), std::string::npos) << t.r.out;
}

// `run --profile` under MPI: rank 0 times its own program's instructions, reported once as the
// threads backend reports device 0's (the same kernels, the gradients' all-reduces among them);
// a pipeline is refused as on threads.
TEST(MpiCli, ProfileTimesRankZerosProgram) {
  auto t = mpirun(2,
                  "run gpt-tiny --mesh 2 --strategy dp=2 --backend mpi --train --steps 3 "
                  "--profile --json");
  ASSERT_EQ(t.r.exit_code, 0) << t.r.err;
  auto j = nlohmann::json::parse(t.r.out);
  ASSERT_TRUE(j.contains("profile")) << t.r.out;
  double share = 0, seconds = 0;
  int64_t calls = 0;
  std::set<std::string> kernels;
  for (const auto& row : j["profile"]) {
    EXPECT_GT(row["calls"].get<int64_t>(), 0);
    share += row["share"].get<double>();
    seconds += row["seconds"].get<double>();
    calls += row["calls"].get<int64_t>();
    kernels.insert(row["kernel"].get<std::string>());
  }
  EXPECT_NEAR(share, 1.0, 1e-6);
  EXPECT_GT(seconds, 0.0);
  EXPECT_LE(seconds, j["median_step_s"].get<double>() * 1.5);  // per timed step
  EXPECT_TRUE(kernels.count("adamw"));
  EXPECT_TRUE(kernels.count("all-reduce"));
  // The same program as device 0's on threads: the same rows and instruction counts.
  auto thr = testing::run_heddle(
      "run gpt-tiny --mesh 2 --strategy dp=2 --train --steps 3 --profile --json");
  ASSERT_EQ(thr.exit_code, 0) << thr.err;
  std::set<std::string> thr_kernels;
  int64_t thr_calls = 0;
  const auto jt = nlohmann::json::parse(thr.out);
  for (const auto& row : jt["profile"]) {
    thr_kernels.insert(row["kernel"].get<std::string>());
    thr_calls += row["calls"].get<int64_t>();
  }
  EXPECT_EQ(kernels, thr_kernels);
  EXPECT_EQ(calls, thr_calls);
  auto text = mpirun(2, "run mlp --mesh 2 --strategy dp=2 --backend mpi --steps 2 --profile");
  ASSERT_EQ(text.r.exit_code, 0) << text.r.err;
  EXPECT_EQ(count(text.r.out, "profile    device 0, per timed step:"), 1u) << text.r.out;
  auto pipe = mpirun(2,
                     "run gpt-tiny --mesh 2 --strategy pp=2 --backend mpi --train --steps 2 "
                     "--profile");
  EXPECT_EQ(pipe.r.exit_code, 1);
  EXPECT_NE(pipe.r.err.find("--profile"), std::string::npos) << pipe.r.err;
}

TEST(MpiCli, ARankThatThrowsStopsEveryRankNamingIt) {
  auto t = mpirun(4, "run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --backend mpi",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_AT=2");
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_LT(t.seconds, 30);
  EXPECT_EQ(count(t.r.err, "rank 1 (" + host() + "): error: injected failure"), 1u) << t.r.err;
  // Each of the other three ranks says which rank failed.
  EXPECT_EQ(count(t.r.err, ": error: rank 1 failed"), 3u) << t.r.err;
}

TEST(MpiCli, AKilledRankStopsEveryRankNamingIt) {
  auto t = mpirun(4, "run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --backend mpi",
                  "HEDDLE_TEST_FAIL_RANK=2 HEDDLE_TEST_FAIL_MODE=kill");
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_LT(t.seconds, 30);
  EXPECT_NE((t.r.out + t.r.err).find("rank 2"), std::string::npos) << t.r.out << t.r.err;
  EXPECT_EQ(t.r.out.find("check"), std::string::npos) << "no summary after a failure";
  // Every survivor names the killed rank itself: it saw the process vanish while waiting, or
  // the launcher's SIGTERM came first.
  for (int r : {0, 1, 3}) {
    std::string line = "heddle: rank " + std::to_string(r) + " (" + host() + "): error: ";
    size_t at = t.r.err.find(line);
    ASSERT_NE(at, std::string::npos) << t.r.err;
    std::string rest = t.r.err.substr(at, t.r.err.find('\n', at) - at);
    EXPECT_NE(rest.find("rank 2 failed"), std::string::npos) << rest;
  }
}

TEST(MpiCli, AKilledRankStopsAPipelineNamingIt) {
  auto t = mpirun(4, "run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,dp=2 --train --backend mpi",
                  "HEDDLE_TEST_FAIL_RANK=3 HEDDLE_TEST_FAIL_AT=3 HEDDLE_TEST_FAIL_MODE=kill");
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_LT(t.seconds, 30);
  EXPECT_GE(count(t.r.err, "rank 3 failed"), 3u) << t.r.err;
  EXPECT_EQ(t.r.out.find("check"), std::string::npos) << "no summary after a failure";
}

TEST(MpiCli, AHungRankTimesOutTheOthers) {
  // The hung rank has nothing to say: mpirun may SIGKILL it 1 s after its SIGTERM.
  auto t = mpirun(2, "run mlp --mesh 2 --strategy tp=2 --backend mpi --timeout 2",
                  "HEDDLE_TEST_FAIL_RANK=1 HEDDLE_TEST_FAIL_MODE=hang", 1);
  EXPECT_NE(t.r.exit_code, 0);
  EXPECT_LT(t.seconds, 30);
  EXPECT_NE(t.r.err.find("rank 0 (" + host() + "): error:"), std::string::npos) << t.r.err;
  EXPECT_NE(t.r.err.find("did not complete within 2"), std::string::npos) << t.r.err;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An ONNX model runs on ranks with its own weights and the --input files, and rank 0 writes
// --output: the same bytes as the threads backend's file (which OnnxCli checks against torch).
TEST(MpiCli, OnnxWeightsAndNpyFilesRunOnRanksLikeOnThreads) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const std::string data = std::string(HEDDLE_SOURCE_DIR) + "/tests/data/";
  for (const std::string name : {"mlp", "decoder"}) {
    std::string dims = name == "mlp" ? " --dim batch=4" : "";  // the decoder's dims are fixed
    std::string args = "run " + data + name + ".onnx" + dims +
                       " --mesh 2 --strategy dp=2 --check --json --input " + data + name +
                       ".in.npy --output " + ::testing::TempDir() + "heddle_mpi_onnx_";
    auto threads = testing::run_heddle(args + "threads.npy");
    auto mpi = mpirun(2, args + "mpi.npy --backend mpi");
    auto jt = json_of(threads, args);
    auto jm = json_of(mpi.r, args + " (mpi)");
    if (jt.is_null() || jm.is_null()) continue;
    EXPECT_TRUE(jm["ok"].get<bool>()) << name;
    EXPECT_EQ(jm["output_digest"], jt["output_digest"]) << name << ": mpi differs from threads";
    std::string a = file_bytes(::testing::TempDir() + "heddle_mpi_onnx_threads.npy");
    EXPECT_FALSE(a.empty()) << name;
    EXPECT_EQ(file_bytes(::testing::TempDir() + "heddle_mpi_onnx_mpi.npy"), a) << name;
  }
  // A pipeline's ranks generate their data: refused, once, rather than run on other weights.
  auto pipe = mpirun(2, "run " + data + "mlp.onnx --dim batch=4 --mesh 2 --strategy pp=2 " +
                            "--backend mpi --input " + data + "mlp.in.npy");
  EXPECT_EQ(pipe.r.exit_code, 1);
  EXPECT_EQ(count(pipe.r.err, "need pp=1 there"), 2u) << pipe.r.err;
}

// Every rank reports its own mistakes, prefixed with its rank and host, and exits 1; no rank
// starts work.
TEST(MpiCli, BadInputIsReportedByEveryRankBeforeAnyWork) {
  // Every rank exits by itself: mpirun need not wait 10 s for survivors to speak (RunMpi.h).
  auto model = mpirun(4, "run no-such-model --mesh 4 --backend mpi", "", 1);
  EXPECT_EQ(model.r.exit_code, 1);
  EXPECT_EQ(count(model.r.err, "no-such-model"), 4u) << model.r.err;
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(model.r.err.find("heddle: rank " + std::to_string(r) + " (" + host() + "): "),
              std::string::npos)
        << model.r.err;
  auto strategy = mpirun(2, "run mlp --mesh 2 --strategy dp=3 --backend mpi", "", 1);
  EXPECT_EQ(strategy.r.exit_code, 1);
  EXPECT_EQ(count(strategy.r.err, "error:"), 2u) << strategy.r.err;
  auto schedule =
      mpirun(2, "run gpt-tiny --mesh 2 --strategy pp=2,schedule=searched --backend mpi", "", 1);
  EXPECT_EQ(schedule.r.exit_code, 1);
  EXPECT_EQ(count(schedule.r.err, "'searched' is for heddle simulate"), 2u) << schedule.r.err;
  auto ranks = mpirun(2, "run mlp --mesh 4 --strategy dp=4 --backend mpi", "", 1);
  EXPECT_EQ(ranks.r.exit_code, 1);
  EXPECT_EQ(count(ranks.r.err, "4 devices but 2 MPI ranks"), 2u) << ranks.r.err;
}

}  // namespace
}  // namespace heddle
