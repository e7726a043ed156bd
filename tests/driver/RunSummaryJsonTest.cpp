// What `heddle run --json` prints of a run's summary (driver/RunSummaryJson.h), and how the
// backend is chosen outside an MPI launcher (driver/RunMpi.h).
#include <gtest/gtest.h>

#include "heddle/driver/RunMpi.h"
#include "heddle/driver/RunSummaryJson.h"

namespace heddle::driver {
namespace {

TEST(RunSummaryJson, KeysFollowWhatTheRunHad) {
  RunSummary s;
  s.mesh = *Mesh::parse("2");
  s.strategy = "dp=2";
  s.digest = "abc";
  s.result.step_times_s = {0.5, 0.25, 0.75};
  s.result.step_cpu_s = {0.75, 0.5, 1.5, 1.0};
  s.result.losses = {2.0f, 1.0f, 0.5f};
  nlohmann::json plain = summary_json(s, "threads", false);
  EXPECT_TRUE(plain["ok"].get<bool>());
  EXPECT_EQ(plain["devices"], 2);
  EXPECT_EQ(plain["backend"], "threads");
  EXPECT_EQ(plain["median_step_s"].get<double>(), 0.5);
  EXPECT_EQ(plain["step_cpu_s"].size(), 4u);
  EXPECT_EQ(plain["median_step_cpu_s"].get<double>(), 0.875);
  for (const char* absent : {"pipeline", "loss", "params_digest", "max_abs_error",
                             "rank_feed_bytes_max", "peak_bytes_per_device"})
    EXPECT_FALSE(plain.contains(absent)) << absent;
  CheckErrors bad;
  bad.max_abs = 1;
  bad.max_rel = 2;
  bad.ok = false;
  s.check = &bad;
  s.stages = 2;
  s.params_digest = "0123456789abcdef";
  s.feed_bytes = std::make_pair(int64_t{10}, int64_t{40});
  nlohmann::json full = summary_json(s, "mpi", true);
  EXPECT_FALSE(full["ok"].get<bool>());
  EXPECT_EQ(full["pipeline"]["stages"], 2);
  EXPECT_FALSE(full["pipeline"].contains("recompute"));  // forward pipelines recompute nothing
  EXPECT_EQ(full["loss"].size(), 3u);
  EXPECT_EQ(full["rank_feed_bytes_max"], 10);
  EXPECT_EQ(full["max_rel_error"].get<double>(), 2);
}

TEST(ChooseBackend, OutsideALauncherThreadsUnlessAsked) {
  std::string b;
  ASSERT_TRUE(choose_backend(b).ok());
  EXPECT_EQ(b, "threads");
  b = "mpi";
  ASSERT_TRUE(choose_backend(b).ok());
  EXPECT_EQ(b, "mpi");
  b = "gpu";
  auto st = choose_backend(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("use 'threads' or 'mpi'"), std::string::npos);
}

}  // namespace
}  // namespace heddle::driver
