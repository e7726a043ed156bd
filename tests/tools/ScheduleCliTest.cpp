// `heddle schedule` end to end: output, JSON keys, trace file and the exit code of every kind of
// bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/RunCli.h"

namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Per-process names: ctest runs the tests of this file in parallel processes.
std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "/heddle_cli_" + std::to_string(getpid()) + "_" + name;
}

CliRun heddle(const std::string& args) {
  auto r = heddle::testing::run_heddle(args);
  return {r.exit_code, r.out, r.err};
}

std::string write(const std::string& name, const std::string& text) {
  std::string path = tmp(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ScheduleCli, PrintsTimelineAndFigures) {
  CliRun r = heddle("schedule --placement vshape --devices 4 --micro-batches 8 --memory 4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dev 0 |F0 F1 F2 F3 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("makespan         33"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("period           3"), std::string::npos);
  EXPECT_NE(r.out.find("peak memory      4 3 2 1"), std::string::npos);
  EXPECT_NE(r.out.find("lower bound      33"), std::string::npos);
  EXPECT_NE(r.out.find("valid            yes"), std::string::npos);
}

TEST(ScheduleCli, JsonAndBaseline) {
  CliRun r = heddle(
      "schedule --placement vshape --devices 4 --micro-batches 8 --memory 8 --baseline gpipe "
      "--json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"makespan", "period", "bubble_fraction", "peak_memory", "lower_bound",
                          "search_time_s", "valid"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["makespan"], 33);
  EXPECT_EQ(j["peak_memory"], nlohmann::json({8, 8, 8, 8}));
  EXPECT_EQ(j["valid"], true);
  // GPipe needs m activations; under --memory 4 it is printed but marked invalid.
  CliRun over = heddle(
      "schedule --placement vshape --devices 4 --micro-batches 8 --memory 4 --baseline gpipe "
      "--json");
  ASSERT_EQ(over.code, 0);
  EXPECT_EQ(nlohmann::json::parse(over.out)["valid"], false);
  EXPECT_NE(over.err.find("above the limit 4"), std::string::npos) << over.err;
}

TEST(ScheduleCli, WritesAChromeTrace) {
  std::string trace = tmp("trace.json");
  CliRun r =
      heddle("schedule --placement kshape --devices 4 --micro-batches 4 --memory 8 --trace " +
             trace + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(read(trace));
  ASSERT_TRUE(j.contains("traceEvents"));
  int complete = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("pid") && e.contains("tid"));
  }
  // kshape on 4 devices: 4 single-device forwards + 4 backwards + 2 blocks on all 4 devices.
  EXPECT_EQ(complete, 4 * (8 + 2 * 4));
}

TEST(ScheduleCli, PlacementFile) {
  std::string path = write("ok.json", R"({"devices": 2, "blocks": [
      {"name": "f0", "type": "forward", "span": 1, "memory": 1, "devices": [0]},
      {"name": "f1", "type": "forward", "span": 1, "memory": 1, "devices": [1]},
      {"name": "b1", "type": "backward", "span": 1, "memory": -1, "devices": [1]},
      {"name": "b0", "type": "backward", "span": 1, "memory": -1, "devices": [0]}],
      "deps": [["f0", "f1"], ["f1", "b1"], ["b1", "b0"]]})");
  CliRun r = heddle("schedule --placement " + path + " --micro-batches 4 --memory 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["makespan"], 2 * (4 + 2 - 1));  // 1F1B, F = B = 1
}

/// Runs a request that must fail with exit code 1 and a message containing `expect`.
void expect_user_error(const std::string& args, const std::string& expect) {
  CliRun r = heddle(args);
  EXPECT_EQ(r.code, 1) << args << "\n" << r.out << r.err;
  EXPECT_NE(r.err.find(expect), std::string::npos) << args << "\nstderr: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(ScheduleCli, BadInputExitsWithOne) {
  std::string head = R"({"devices": 2, "blocks": [)";
  std::string cyclic = write("cyclic.json", head + R"(
      {"name": "a", "span": 1, "devices": [0]}, {"name": "b", "span": 1, "devices": [1]}],
      "deps": [["a", "b"], ["b", "a"]]})");
  expect_user_error("schedule --placement " + cyclic + " --micro-batches 2 --memory 4", "cycle");
  std::string nodev = write("nodev.json", head + R"({"name": "a", "span": 1, "devices": [2]}]})");
  expect_user_error("schedule --placement " + nodev + " --micro-batches 2 --memory 4",
                    "is on device 2, which does not exist");
  std::string zero = write("zero.json", head + R"({"name": "a", "span": 0, "devices": [0]}]})");
  expect_user_error("schedule --placement " + zero + " --micro-batches 2 --memory 4",
                    "spans must be positive");
  std::string neg = write("neg.json", head + R"({"name": "a", "span": -1, "devices": [0]}]})");
  expect_user_error("schedule --placement " + neg + " --micro-batches 2 --memory 4",
                    "spans must be positive");
  expect_user_error("schedule --placement vshape --devices 4 --micro-batches 8 --memory 0",
                    "use --memory 1 or more");
  expect_user_error("schedule --placement kshape --devices 4 --micro-batches 8 --memory 1",
                    "use --memory 2 or more");
  expect_user_error("schedule --placement wshape --devices 4 --micro-batches 8 --memory 4",
                    "unknown placement");
  expect_user_error("schedule --placement vshape --micro-batches 8 --memory 4",
                    "--devices is required");
  expect_user_error("schedule --placement vshape --devices 4 --micro-batches 0 --memory 4",
                    "at least 1");
  expect_user_error(
      "schedule --placement kshape --devices 4 --micro-batches 8 --memory 4 --baseline 1f1b",
      "does not apply");
  expect_user_error("schedule --placement /nonexistent.json --micro-batches 8 --memory 4",
                    "cannot open");
  CliRun missing = heddle("schedule --placement vshape --devices 4");
  EXPECT_EQ(missing.code, 1);
}

TEST(ScheduleCli, SameInputSameOutput) {
  std::string args = "schedule --placement nnshape --devices 8 --micro-batches 32 --memory 6";
  CliRun a = heddle(args), b = heddle(args);
  ASSERT_EQ(a.code, 0);
  auto strip = [](std::string s) { return s.substr(0, s.find("search time")); };
  EXPECT_EQ(strip(a.out), strip(b.out));
}

}  // namespace
