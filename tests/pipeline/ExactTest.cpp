#include <fmt/format.h>
#include <gtest/gtest.h>

#include "BruteForce.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/ExactSolver.h"
#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {
namespace {

TEST(Exact, ProvesTheBruteForceOptimum) {
  struct Case {
    BlockPlacement p;
    int m;
  };
  std::vector<Case> cases = {{make_vshape(2), 2},    {make_vshape(2), 3}, {make_vshape(3), 2},
                             {make_vshape_zb(2), 2}, {make_mshape(2), 2}, {make_kshape(2), 2}};
  for (auto& [p, m] : cases) {
    for (double extra : {0.0, 1.0}) {
      double memory = minimum_memory(p, m) + extra;
      SCOPED_TRACE(fmt::format("{} p={} m={} memory={}", p.name, p.num_devices, m, memory));
      auto e = solve_exact(p, m, memory);
      ASSERT_TRUE(e.ok()) << e.error().to_string();
      EXPECT_TRUE(e->optimal);
      EXPECT_TRUE(validate_schedule(p, e->schedule, memory).ok());
      EXPECT_EQ(e->makespan, testing::brute_force_makespan(p, m, memory));
      EXPECT_EQ(e->bound, e->makespan);
    }
  }
}

TEST(Exact, SearchIsOptimalOnSmallCases) {
  // Cases up to 4 devices and 4 micro-batches that CBC proves in well under a second.
  struct Case {
    BlockPlacement p;
    int m;
    double memory;
  };
  std::vector<Case> cases = {
      {make_vshape(4), 3, 4},    {make_vshape(4), 4, 2},    {make_vshape(3), 4, 3},
      {make_vshape_zb(3), 3, 3}, {make_vshape_zb(4), 3, 2}, {make_xshape(2), 2, 2},
      {make_vshape(2), 4, 2},    {make_vshape_zb(2), 4, 2},
  };
  for (auto& [p, m, memory] : cases) {
    SCOPED_TRACE(fmt::format("{} p={} m={} memory={}", p.name, p.num_devices, m, memory));
    auto e = solve_exact(p, m, memory);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    EXPECT_TRUE(e->optimal);
    ScheduleSearchOptions heuristic_only;  // no branch and bound: the heuristic against CBC
    heuristic_only.exact_max_ops = 0;
    auto s = search_schedule(p, m, memory, heuristic_only);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->makespan, e->makespan);
  }
}

TEST(Exact, RefusesWhatItCannotSolve) {
  auto real = solve_exact(make_vshape(2, 0.5, 1), 2, 2);
  ASSERT_FALSE(real.ok());
  EXPECT_NE(real.error().message.find("whole-number spans"), std::string::npos);
  ExactOptions small;
  small.max_variables = 10;
  auto big = solve_exact(make_vshape(4), 8, 4, small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("variables"), std::string::npos);
  EXPECT_FALSE(solve_exact(make_vshape(2), 2, 0).ok());
}

}  // namespace
}  // namespace heddle::pipeline
