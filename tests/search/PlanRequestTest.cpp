// A plan request (heddle/search/PlanRequest.h): its figures become search options or a
// diagnostic naming the flag; the trace of the winner is simulated as it was planned.
#include <gtest/gtest.h>

#include <functional>

#include "heddle/search/PlanRequest.h"

namespace heddle::search {
namespace {

TEST(PlanRequest, FiguresBecomeSearchOptionsOrADiagnostic) {
  auto cluster = *cost::cluster_preset("a100x8");
  PlanRequest r;
  r.objective = "energy";
  r.max_devices = 4;
  r.time_limit_s = 0;
  r.train = true;
  auto o = plan_search_options(r, cluster);
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->objective, Objective::kEnergy);
  EXPECT_EQ(o->max_devices, 4);
  EXPECT_EQ(o->time_limit_s, 0);
  EXPECT_TRUE(o->train);
  struct Bad {
    std::function<void(PlanRequest&)> set;
    const char* says;
  } bad[] = {
      {[](PlanRequest& q) { q.objective = "speed"; }, "--objective 'speed' is not an objective"},
      {[](PlanRequest& q) { q.max_devices = -1; }, "--max-devices must be positive"},
      {[](PlanRequest& q) { q.target_step_time_s = -1; }, "--target-step-time must be positive"},
      {[](PlanRequest& q) { q.time_limit_s = -2; },
       "--time-limit must be zero or more seconds, not -2"},
  };
  for (const Bad& b : bad) {
    PlanRequest q;
    b.set(q);
    auto e = plan_search_options(q, cluster);
    ASSERT_FALSE(e.ok()) << b.says;
    EXPECT_NE(e.error().message.find(b.says), std::string::npos) << e.error().message;
  }
  cluster.device.tdp_watts = 0;  // no power figures: no energy objective
  EXPECT_FALSE(plan_search_options(r, cluster).ok());
}

TEST(PlanRequest, TheWinnersFilesDescribeIt) {
  zoo::ZooOverrides over;
  over.layers = 2;
  over.batch = 8;
  auto src = *model::zoo_scalable_model("gpt3-1.3b", over);
  auto cluster = *cost::cluster_preset("a100x8");
  PlanRequest r;
  r.time_limit_s = 20;
  auto o = plan_search_options(r, cluster);
  ASSERT_TRUE(o.ok());
  o->intra_op = false;
  auto found = search_configs(src, cluster, *o);
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  nlohmann::json j = plan_file_json(*found, src, "gpt3-1.3b", cluster, false);
  EXPECT_EQ(j["model"], "gpt3-1.3b");
  EXPECT_EQ(j["cluster_devices"], 8);
  EXPECT_TRUE(j.contains("ranking"));
  EXPECT_TRUE(j.contains("breakdown"));
  auto trace = plan_trace(src, cluster, found->best, false, false, 20);
  ASSERT_TRUE(trace.ok()) << trace.error().to_string();
  EXPECT_NE(trace->find("traceEvents"), std::string::npos);
}

}  // namespace
}  // namespace heddle::search
