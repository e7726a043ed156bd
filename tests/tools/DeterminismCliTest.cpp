// Determinism end to end: the same `heddle plan` gives byte-identical plan.json (and trace and
// graph) across runs and across BLAS thread counts; the threaded executor's outputs are
// bit-identical across runs and thread counts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

// The bytes of `path`, which the command must have written: a missing or empty file fails the
// test (two files never written would otherwise compare equal).
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << " was not written";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << path << " is empty";
  return ss.str();
}

// Runs `args` (ending in an output option) once per BLAS thread count, writing to
// `out` + index + `suffix`; returns those paths.
std::vector<std::string> outputs_per_threads(const std::string& args, const std::string& out,
                                             const std::string& suffix,
                                             const std::vector<const char*>& threads) {
  std::vector<std::string> outs;
  for (size_t i = 0; i < threads.size(); ++i) {
    setenv("OPENBLAS_NUM_THREADS", threads[i], 1);
    setenv("OMP_NUM_THREADS", threads[i], 1);
    std::string target = out + std::to_string(i) + suffix;
    std::filesystem::remove_all(target);  // what an earlier run wrote must not stand in
    auto r = run_heddle(args + " " + target);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    outs.push_back(target);
  }
  unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv("OMP_NUM_THREADS");
  return outs;
}

TEST(Determinism, PlanIsByteIdenticalAcrossRunsAndThreadCounts) {
  const std::string data = testing::source_dir() + "/tests/data/";
  for (const std::string& args :
       {std::string("plan gpt-tiny --cluster a100x8 --train --time-limit 120 --out"),
        std::string("plan gpt3-1.3b --layers 4 --batch 8 --train --cluster a100x64 --time-limit "
                    "120 --out"),
        "plan " + data + "decoder.onnx --cluster a100x4 --time-limit 120 --out",
        "plan " + testing::source_dir() + "/examples/mlp.hd --cluster a100x8 --out"}) {
    auto dirs = outputs_per_threads(args, ::testing::TempDir() + "/det_plan", "", {"1", "1", "2"});
    std::string first = slurp(dirs[0] + "/plan.json");
    ASSERT_FALSE(first.empty()) << args;
    EXPECT_TRUE(nlohmann::json::parse(first).contains("strategy")) << first;
    for (size_t i = 1; i < dirs.size(); ++i)
      for (const char* f : {"plan.json", "trace.json", "graph.dot"})
        EXPECT_EQ(slurp(dirs[i] + "/" + f), slurp(dirs[0] + "/" + f)) << args << ": " << f;
  }
}

TEST(Determinism, ThreadedRunOutputsAreBitIdenticalAcrossRunsAndThreadCounts) {
  for (const char* args : {"run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --output",
                           "run llama-tiny --mesh 2 --strategy tp=2,sp=on --output",
                           "run moe-tiny --mesh 4 --strategy dp=2,tp=2 --output"}) {
    auto files =
        outputs_per_threads(args, ::testing::TempDir() + "/det_out", ".npy", {"1", "1", "2"});
    std::string first = slurp(files[0]);
    ASSERT_GT(first.size(), 128u) << args;
    for (size_t i = 1; i < files.size(); ++i) EXPECT_TRUE(slurp(files[i]) == first) << args;
  }
}

}  // namespace
}  // namespace heddle
