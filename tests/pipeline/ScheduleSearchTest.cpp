#include <fmt/format.h>
#include <gtest/gtest.h>

#include "BruteForce.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {
namespace {

const char* const kBuiltins[] = {"vshape", "interleaved:2", "vshape-zb", "xshape",
                                 "mshape", "kshape",        "nnshape"};

ScheduleSearchResult search(const BlockPlacement& p, int m, double memory,
                            const ScheduleSearchOptions& o = {}) {
  auto r = search_schedule(p, m, memory, o);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return *r;
}

TEST(Search, ValidAboveBoundsAndNeverWorseThanABaseline) {
  for (const char* name : kBuiltins) {
    for (int p : {2, 4, 8}) {
      auto pl = builtin_placement(name, p);
      ASSERT_TRUE(pl.ok());
      for (int m : {4, 8, 16}) {
        const double min_mem = minimum_memory(*pl, m);
        for (double memory : {min_mem, min_mem + 1, double(p), 2.0 * p, 1e6}) {
          if (memory < min_mem) continue;
          SCOPED_TRACE(fmt::format("{} p={} m={} memory={}", name, p, m, memory));
          ScheduleSearchResult r = search(*pl, m, memory);
          EXPECT_TRUE(validate_schedule(*pl, r.schedule, memory).ok());
          EXPECT_GE(r.makespan, r.lower_bound - 1e-9);
          EXPECT_GE(r.period, r.period_lower_bound - 1e-9);
          EXPECT_EQ(r.makespan, compute_stats(*pl, r.schedule).makespan);
          for (const auto& b : applicable_baselines(*pl, m)) {
            auto base = build_baseline(b, *pl, m);
            ASSERT_TRUE(base.ok());
            if (!validate_schedule(*pl, base->schedule, memory).ok()) continue;
            EXPECT_LE(r.makespan, compute_stats(*pl, base->schedule).makespan + 1e-9) << b;
          }
        }
      }
    }
  }
}

TEST(Search, ReachesTheLowerBoundWhereItIsTight) {
  // With memory for 1F1B, the V-shape's best makespan is its bound 3(m + p - 1); the repeating
  // unit's period is the busiest device's load.
  for (int p : {4, 8}) {
    for (int m : {8, 64}) {
      ScheduleSearchResult r = search(make_vshape(p), m, p);
      EXPECT_EQ(r.makespan, 3 * (m + p - 1));
      EXPECT_EQ(r.period, 3);
    }
  }
  // Multi-device blocks: the unit reserves their slot first and still reaches the load bound.
  EXPECT_EQ(search(make_mshape(4), 64, 1e6).period, 5);
  EXPECT_EQ(search(make_nnshape(4), 64, 1e6).period, 7);
  EXPECT_EQ(search(make_kshape(4), 64, 1e6).period, 5);
  EXPECT_EQ(search(make_xshape(4), 64, 1e6).period, 6);
}

TEST(Search, LessMemoryNeverHelps) {
  for (const char* name : kBuiltins) {
    auto pl = builtin_placement(name, 4);
    double prev = 0;
    for (double memory : {1e6, 8.0, 4.0, 2.0}) {
      if (memory < minimum_memory(*pl, 8)) break;
      double ms = search(*pl, 8, memory).makespan;
      EXPECT_GE(ms, prev) << name << " memory " << memory;
      prev = ms;
    }
  }
}

TEST(Search, MatchesBruteForceOnTinyCases) {
  struct Case {
    BlockPlacement p;
    int m;
  };
  std::vector<Case> cases = {
      {make_vshape(2), 2},       {make_vshape(2), 3},         {make_vshape(3), 2},
      {make_vshape(2, 1, 1), 3}, {make_vshape_zb(2), 2},      {make_mshape(2), 2},
      {make_kshape(2), 2},       {make_interleaved(2, 2), 2}, {make_xshape(2), 1}};
  ScheduleSearchOptions heuristic_only;
  heuristic_only.exact_max_ops = 0;
  for (auto& [p, m] : cases) {
    for (double extra : {0.0, 1.0, 1e6}) {
      double memory = minimum_memory(p, m) + extra;
      SCOPED_TRACE(fmt::format("{} p={} m={} memory={}", p.name, p.num_devices, m, memory));
      const double optimum = testing::brute_force_makespan(p, m, memory);
      // The full search (with its bounded branch and bound on tiny instances) is optimal.
      EXPECT_EQ(search(p, m, memory).makespan, optimum);
      // The heuristic alone (units + list schedules + baselines) is optimal on all of these but
      // one: interleaved:2 on 2 devices with memory 3 gives 19 against 18.
      double heuristic = search(p, m, memory, heuristic_only).makespan;
      if (p.family == "interleaved" && memory == 3) {
        EXPECT_EQ(heuristic, 19);
        EXPECT_EQ(optimum, 18);
      } else {
        EXPECT_EQ(heuristic, optimum);
      }
    }
  }
}

TEST(Search, IsDeterministic) {
  for (const char* name : kBuiltins) {
    auto pl = builtin_placement(name, 8);
    ScheduleSearchResult a = search(*pl, 32, 6), b = search(*pl, 32, 6);
    EXPECT_EQ(a.schedule, b.schedule) << name;
    EXPECT_EQ(a.method, b.method);
    EXPECT_EQ(a.period, b.period);
  }
}

TEST(Search, RealSpans) {
  BlockPlacement p = make_vshape(4, 0.7, 1.3);
  ScheduleSearchResult r = search(p, 16, 4);
  EXPECT_TRUE(validate_schedule(p, r.schedule, 4).ok());
  EXPECT_NEAR(r.makespan, 2.0 * (16 + 3), 1e-9);  // 1F1B's (m + p - 1)(F + B)
}

TEST(Search, RejectsBadRequests) {
  auto low = search_schedule(make_vshape(4), 8, 0.5);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().message,
            "memory limit 0.5 is below 1, the memory device 0 needs even when micro-batches run "
            "one at a time; use --memory 1 or more");
  // mshape's shared block is on every device: still one micro-batch needs 1 everywhere.
  EXPECT_EQ(minimum_memory(make_mshape(4), 8), 1);
  // kshape holds two activations (branch + join) on every device.
  EXPECT_EQ(minimum_memory(make_kshape(4), 8), 2);
  EXPECT_FALSE(search_schedule(make_vshape(4), 0, 4).ok());
  BlockPlacement cyclic = make_vshape(2);
  cyclic.deps.push_back({3, 0});
  EXPECT_FALSE(search_schedule(cyclic, 4, 4).ok());
}

}  // namespace
}  // namespace heddle::pipeline
