// Limits end to end: plan and simulate on a 4096-device cluster, and the search's --time-limit
// honoured within a second on a model with hundreds of configurations, each simulation taking a
// tenth of a second or more (a single simulation is not interrupted: docs/reliability.md).
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

// Starting `heddle` and building the model, on top of the search: a few seconds, several times
// that when every library is built with sanitizers (make test-sanitize: 6.3 s seen against 3).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kStartupSeconds = 15.0;
#else
constexpr double kStartupSeconds = 3.0;
#endif

TEST(LimitsCli, SearchTimeLimitIsHonouredWithinASecond) {
  // A search that takes about 50 s without a limit (gpt3-175b on a100x512 now completes in about
  // half a second, within either limit).
  for (double limit : {1.0, 3.0}) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_heddle(
        "plan megatron-1t --layers 512 --cluster a100x4096 --train --batch 4096 --json "
        "--time-limit " +
            std::to_string(limit),
        "", /*timeout_s=*/120);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.exit_code == 0) {  // a plan from the configurations simulated in time
      auto j = nlohmann::json::parse(r.out);
      EXPECT_FALSE(j["proven_best"].get<bool>()) << "the limit should cut this search short";
      EXPECT_LE(j["search_time_s"].get<double>(), limit + 1.0) << r.out;
    } else {  // nothing that fits was found in time, and the message says so
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_NE(r.err.find("the time limit ran out after"), std::string::npos) << r.err;
    }
    // The whole process: the search plus starting up and building the model.
    EXPECT_LE(wall, limit + kStartupSeconds);
  }
}

TEST(LimitsCli, PlansAndSimulatesOnAFourThousandDeviceCluster) {
  auto plan = run_heddle(
      "plan gpt3-175b --cluster a100x4096 --train --batch 4096 --json "
      "--strategy auto,zero=3,recompute=full --time-limit 10",  // the first simulated fits
      "", /*timeout_s=*/120);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto p = nlohmann::json::parse(plan.out);
  EXPECT_TRUE(p["feasible"].get<bool>());
  auto sim = run_heddle(
      "simulate gpt3-175b --cluster a100x4096 --train --batch 4096 --json "
      "--strategy " +
          p["strategy"].get<std::string>() + " --stage-planner " +
          (p["stage_planner"].get<std::string>() == "tactics" ? "tactics" : "ilp"),
      "", /*timeout_s=*/120);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto s = nlohmann::json::parse(sim.out);
  EXPECT_DOUBLE_EQ(s["step_time_s"].get<double>(), p["step_time_s"].get<double>());
  EXPECT_LE(s["peak_memory_bytes"].get<double>(), s["memory_limit_bytes"].get<double>());
}

// Requests beyond a bound (docs/reliability.md, "Limits") end at once with exit 1 naming the bound,
// never in a crash, an allocation failure or a process the kernel kills.
TEST(LimitsCli, RequestsBeyondABoundAreRefusedNamingIt) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{"plan /dev/zero --cluster a100x8", "the limit is 128.00 MiB"},
           Case{"run mlp --input /dev/zero", "the limit is"},
           Case{"run mlp --mesh 100000", "more than the 1024 the threads backend runs"},
           Case{"schedule --placement vshape --devices 100000 --micro-batches 100000 --memory 4",
                "more than the 4096 a schedule search handles"},
           Case{"schedule --placement vshape --devices 8 --micro-batches 100000 --memory 4",
                "more than the 65536 a schedule search handles"},
           Case{"plan gpt3-1.3b --cluster a100x99999999999", "more than the 131072"},
       }) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_heddle(c.args, "", /*timeout_s=*/60);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    // Reading 128 MiB of /dev/zero takes ~0.1 s idle; the machine running the tests may be loaded.
    EXPECT_LT(s, kStartupSeconds + 20) << c.args;
  }
}

}  // namespace
}  // namespace heddle
