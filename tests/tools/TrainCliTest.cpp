// `heddle run MODEL --mesh 1 --train --steps N`: the loss printed per step falls; bad requests
// exit 1 with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/RunCli.h"

namespace {

struct Ran {
  int code = -1;
  std::string out;
};

// `heddle ARGS` with stderr after stdout (the messages the tests look for are on either); a
// successful `--json` run gives stdout alone: the JSON object (stderr streams JSON-lines progress).
Ran heddle(const std::string& args) {
  auto r = heddle::testing::run_heddle(args);
  const bool json = args.find("--json") != std::string::npos && r.exit_code == 0;
  return {r.exit_code, json ? r.out : r.out + r.err};
}

TEST(TrainCli, LossFalls) {
  for (const char* model : {"gpt-tiny", "mlp --batch 8", "llama-tiny"}) {
    SCOPED_TRACE(model);
    Ran r = heddle(std::string("run ") + model + " --mesh 1 --train --steps 8 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    auto loss = j.at("loss").get<std::vector<double>>();
    ASSERT_EQ(loss.size(), 8u);
    EXPECT_LT(loss.back(), loss.front()) << r.out;
    EXPECT_TRUE(j.at("ok").get<bool>());
  }
}

// Issue #23: every shipped example ends in a scalar loss and trains, on one thread-device and on
// four, checked against the single-device reference; the loss falls.
TEST(TrainCli, EveryShippedExampleTrainsOnOneAndFourDevices) {
  std::vector<std::string> examples;
  for (const auto& e : std::filesystem::directory_iterator(HEDDLE_SOURCE_DIR "/examples"))
    if (e.path().extension() == ".hd") examples.push_back(e.path().string());
  ASSERT_GE(examples.size(), 3u);
  for (const auto& path : examples)
    for (int mesh : {1, 4}) {
      SCOPED_TRACE(path + " --mesh " + std::to_string(mesh));
      Ran r = heddle("run " + path + " --mesh " + std::to_string(mesh) +
                     " --train --steps 4 --check --json");
      ASSERT_EQ(r.code, 0) << r.out;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_TRUE(j.at("ok").get<bool>()) << r.out;
      auto loss = j.at("loss").get<std::vector<double>>();
      ASSERT_EQ(loss.size(), 4u);
      EXPECT_LT(loss.back(), loss.front()) << r.out;
    }
}

// Issue #23: a conv2d without its optional attributes (stride, padding, dilation, groups) trains
// like one that spells them out (autodiff used to fail with "map::at").
TEST(TrainCli, ConvWithoutOptionalAttributesTrains) {
  std::string path = ::testing::TempDir() + "/conv_defaults.hd";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "graph conv_defaults {\n"
      "  input %x: f32[4, 2, 8, 8]\n"
      "  input %labels: i64[4]\n"
      "  param %k: f32[3, 2, 3, 3]\n"
      "  %c: f32[4, 3, 6, 6] = conv2d [n=4, co=3, oh=6, ow=6, ci=2:sum] %x(n, ci, oh, ow)[1, 1, 3, "
      "3], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)\n"
      "  %g: f32[4, 3] = global_avgpool [n=4, c=3] %c(n, c, 0, 0)[1, 1, 6, 6] -> (n, c)\n"
      "  %ce: f32[4] = cross_entropy [n=4] %g(n, 0)[1, 3], %labels(n) -> (n)\n"
      "  %loss: f32[] = reduce_mean [n=4:sum] %ce(n) -> ()\n"
      "  output %loss\n"
      "}\n",
      f);
  std::fclose(f);
  for (int mesh : {1, 2}) {
    Ran r = heddle("run " + path + " --mesh " + std::to_string(mesh) +
                   " --train --steps 3 --check --json");
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("ok").get<bool>()) << r.out;
    auto loss = j.at("loss").get<std::vector<double>>();
    ASSERT_EQ(loss.size(), 3u);
    EXPECT_LT(loss.back(), loss.front()) << r.out;
  }
}

TEST(TrainCli, TextOutputPrintsEveryStep) {
  Ran r = heddle("run gpt-tiny --mesh 1 --train --steps 3");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"step    1  loss", "step    2  loss", "step    3  loss"})
    EXPECT_NE(r.out.find(s), std::string::npos) << r.out;
}

// A run whose loss turns NaN says so, in text and JSON mode alike, and with --check (which
// compares NaN with NaN as equal) names that too; a finite run says nothing.
TEST(TrainCli, ADivergedLossIsFlagged) {
  for (const char* mode : {"", " --json", " --check"}) {
    SCOPED_TRACE(mode);
    auto r = heddle::testing::run_heddle(std::string("run gpt-tiny --mesh 1 --train --steps 3 "
                                                     "--lr 1e30") +
                                         mode);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("the loss is NaN at step 2: the run diverged"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("NaN with NaN") != std::string::npos, std::string(mode) == " --check");
  }
  auto fine = heddle::testing::run_heddle("run gpt-tiny --mesh 1 --train --steps 3");
  ASSERT_EQ(fine.exit_code, 0);
  EXPECT_EQ(fine.err.find("diverged"), std::string::npos) << fine.err;
}

TEST(TrainCli, BadRequestsExitOne) {
  Ran steps = heddle("run gpt-tiny --mesh 1 --train --steps 0");
  EXPECT_EQ(steps.code, 1);
  EXPECT_NE(steps.out.find("--steps must be >= 1"), std::string::npos);
  Ran big = heddle("run gpt3-175b --mesh 1 --train");
  EXPECT_EQ(big.code, 1);
  // The host limit comes from the host: the need and the physical memory, both named.
  EXPECT_NE(big.out.find("the run needs 3.82 TiB"), std::string::npos) << big.out;
  EXPECT_NE(big.out.find("of host memory but the host has"), std::string::npos) << big.out;
  Ran allowed = heddle("run gpt-tiny --mesh 1 --host-memory 10KiB");
  EXPECT_EQ(allowed.code, 1);
  EXPECT_NE(allowed.out.find("but --host-memory allows 10.00 KiB"), std::string::npos)
      << allowed.out;
  Ran heads = heddle("show gpt-tiny --heads 5");
  EXPECT_EQ(heads.code, 1);
  EXPECT_NE(heads.out.find("hidden 64 is not divisible by heads 5"), std::string::npos);
  Ran show = heddle("show gpt3-175b --train --json");
  ASSERT_EQ(show.code, 0) << show.out.substr(0, 400);
  EXPECT_GT(nlohmann::json::parse(show.out).at("flops").get<double>(), 2e15);
}

// --steps repeats forward-only runs too; JSON reports every step's time and CPU time, their
// medians and each device's peak bytes; the outputs equal a one-step run's.
TEST(TrainCli, ForwardStepsAreTimedAndRepeatable) {
  Ran three = heddle("run mlp --mesh 2 --steps 3 --check --json");
  ASSERT_EQ(three.code, 0) << three.out.substr(0, 400);
  auto j = nlohmann::json::parse(three.out);
  ASSERT_EQ(j.at("step_times_s").size(), 3u);
  std::vector<double> t = j.at("step_times_s").get<std::vector<double>>();
  std::sort(t.begin(), t.end());
  EXPECT_DOUBLE_EQ(j.at("median_step_s").get<double>(), t[1]);
  // Every step's CPU time: some, and no more than the process's two devices' threads could
  // spend in the step's wall time (the clock's granularity aside).
  std::vector<double> cpu = j.at("step_cpu_s").get<std::vector<double>>();
  ASSERT_EQ(cpu.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GE(cpu[i], 0.0);
    EXPECT_LE(cpu[i], 2 * j.at("step_times_s")[i].get<double>() + 0.01) << "step " << i + 1;
  }
  EXPECT_GT(j.at("median_step_cpu_s").get<double>(), 0.0);
  ASSERT_EQ(j.at("peak_bytes_per_device").size(), 2u);
  EXPECT_GT(j.at("peak_bytes_per_device")[0].get<int64_t>(), 0);
  EXPECT_TRUE(j.at("ok").get<bool>());
  Ran one = heddle("run mlp --mesh 2 --json");
  ASSERT_EQ(one.code, 0);
  auto k = nlohmann::json::parse(one.out);
  EXPECT_EQ(k.at("step_times_s").size(), 1u);
  EXPECT_EQ(k.at("output_digest"), j.at("output_digest"));
}

// Each device's peak sits next to the cost model's figure for it: what the device holds (its
// peak of live tiles plus the parameters, optimizer state and inputs it reads) and what the
// simulator predicts under heddle's executor for the same strategy on as many devices. On one
// device the held bytes beyond the peak are the whole training feeds: every parameter with its
// two AdamW moments (`show --train` counts them) and the token ids and labels. Pipelines report
// neither.
TEST(TrainCli, RunsPutThePeakNextToTheCostModelsPrediction) {
  Ran show = heddle("show gpt-tiny --train --json");
  ASSERT_EQ(show.code, 0) << show.out.substr(0, 400);
  const double states = 4 * nlohmann::json::parse(show.out).at("parameters").get<double>();
  for (const char* strategy : {"", " --mesh 2 --strategy dp=2", " --mesh 2 --strategy tp=2"}) {
    SCOPED_TRACE(strategy);
    const bool one = std::string(strategy).empty();
    Ran r = heddle(std::string("run gpt-tiny --train --steps 1 --json") +
                   (one ? " --mesh 1" : strategy));
    ASSERT_EQ(r.code, 0) << r.out.substr(0, 400);
    auto j = nlohmann::json::parse(r.out);
    const auto peak = j.at("peak_bytes_per_device").get<std::vector<int64_t>>();
    const auto held = j.at("held_bytes_per_device").get<std::vector<int64_t>>();
    const auto predicted = j.at("predicted_peak_bytes_per_device").get<std::vector<double>>();
    ASSERT_EQ(held.size(), peak.size());
    ASSERT_EQ(predicted.size(), peak.size());
    for (size_t d = 0; d < peak.size(); ++d) {
      EXPECT_GT(held[d], peak[d]) << "device " << d;
      EXPECT_GT(predicted[d], 0) << "device " << d;
    }
    if (one) {  // the feeds: parameters and moments, plus [8, 128] ids and labels of int64
      EXPECT_GE(static_cast<double>(held[0] - peak[0]), states);
      EXPECT_LE(static_cast<double>(held[0] - peak[0]), states + 2 * 8 * 128 * 8);
    }
    Ran text =
        heddle(std::string("run gpt-tiny --train --steps 1") + (one ? " --mesh 1" : strategy));
    EXPECT_NE(text.out.find("the cost model predicts"), std::string::npos) << text.out;
  }
  // An op-by-op plan has its held bytes and says why there is no prediction.
  Ran searched = heddle("run gpt-tiny --train --steps 1 --mesh 2 --strategy auto");
  ASSERT_EQ(searched.code, 0) << searched.out.substr(0, 400);
  EXPECT_NE(searched.out.find("no cost-model prediction: the plan shards op by op"),
            std::string::npos)
      << searched.out;
  Ran pipe = heddle("run gpt-tiny --train --steps 1 --mesh 2 --strategy pp=2 --json");
  ASSERT_EQ(pipe.code, 0) << pipe.out.substr(0, 400);
  auto p = nlohmann::json::parse(pipe.out);
  EXPECT_TRUE(p.contains("peak_bytes_per_device"));
  EXPECT_FALSE(p.contains("predicted_peak_bytes_per_device"));
}

}  // namespace
