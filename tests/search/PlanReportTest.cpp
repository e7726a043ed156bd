// What a compared plan reports: the keys two strategies set differently, and ranking rows that
// tie with the one above (step times within 0.1%) explained.
#include <gtest/gtest.h>

#include "heddle/search/PlanReport.h"

namespace heddle::search {
namespace {

TEST(PlanReport, StrategyDifferenceListsTheKeysThatDiffer) {
  struct Case {
    const char *a, *b, *want;
  } cases[] = {
      {"dp=2,tp=2", "dp=2,tp=2", ""},
      {"dp=2,tp=2,zero=1", "dp=2,tp=2,zero=2", "zero 1 vs 2"},
      {"dp=4,recompute=none", "dp=4,recompute=selective,sp=on",
       "recompute none vs selective, sp unset vs on"},
      {"dp=2,pp=2", "dp=4", "dp 2 vs 4, pp 2 vs unset"},
  };
  for (const Case& c : cases) EXPECT_EQ(strategy_difference(c.a, c.b), c.want) << c.a;
}

ConfigResult ranked(const std::string& strategy, double step_s, double memory) {
  ConfigResult c;
  c.sim.strategy = strategy;
  c.sim.step_time_s = step_s;
  c.sim.peak_memory_bytes = memory;
  return c;
}

TEST(PlanReport, RankingExplainsTies) {
  std::string text =
      ranking_text({ranked("dp=4,zero=1", 1.0, 2e9), ranked("dp=4,zero=2", 1.0005, 1e9),
                    ranked("dp=2,tp=2", 1.5, 1e9)});
  EXPECT_NE(text.find("  ties with the row above: zero 2 vs 1; this one needs less memory\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("ties with the row above: dp"), std::string::npos) << text;
  nlohmann::json j = ranking_json({ranked("dp=4", 1.0, 1e9)});
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["strategy"], "dp=4");
  EXPECT_EQ(j[0]["stage_planner"], "tactics");
}

}  // namespace
}  // namespace heddle::search
