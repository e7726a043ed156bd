// Alpa's inter-op DP against enumerating every slicing and sub-mesh assignment, with schedules,
// micro-batch counts, memory limits and pinned stage counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "heddle/search/InterOp.h"

namespace heddle::search {
namespace {

// A schedule from its text (a test's own literal: parse() must accept it).
pipeline::PipelineSchedule sched(std::string_view text) {
  return *pipeline::PipelineSchedule::parse(text);
}

InterOpProblem random_problem(std::mt19937_64& rng, int64_t layers, int64_t devices) {
  std::uniform_real_distribution<double> u(0.5, 2.0);
  std::vector<double> work, params, acts;
  for (int64_t i = 0; i < layers; ++i) {
    work.push_back(u(rng));
    params.push_back(u(rng));
    acts.push_back(u(rng) * 0.3);
  }
  double efficiency = u(rng) * 0.4;  // how badly a stage scales with its devices
  InterOpProblem p;
  p.layers = layers;
  p.devices = devices;
  for (int64_t n = 1; n <= devices; n *= 2) p.submesh_sizes.push_back(n);
  p.micro_batches = {2, 8};
  p.schedules = {sched("1f1b"), sched("interleaved:2"), sched("zb-h1")};
  p.cost = [=](int64_t first, int64_t last, int64_t n, int64_t m) {
    StageCost c;
    double w = 0, s = 0, a = 0;
    for (int64_t i = first; i < last; ++i) w += work[i], s += params[i], a += acts[i];
    double d = static_cast<double>(n);
    c.seconds = w / std::pow(d, 1 - efficiency) / static_cast<double>(m) + 0.01 * (d - 1);
    c.state_bytes = s / d;
    c.activation_bytes = a / d / static_cast<double>(m);
    return c;
  };
  // A limit between the smallest and a generous stage memory.
  p.memory_limit = 0.8 + u(rng);
  return p;
}

TEST(InterOp, DynamicProgramMatchesEnumeration) {
  std::mt19937_64 rng(11);
  int infeasible = 0, multi_stage = 0, uneven = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int64_t layers = 2 + trial % 4, devices = int64_t{1} << (1 + trial % 3);
    InterOpProblem p = random_problem(rng, layers, devices);
    if (trial % 5 == 4) p.pinned_stages = 2;
    auto dp = solve_inter_op(p);
    auto all = enumerate_inter_op(p);
    ASSERT_EQ(dp.ok(), all.ok()) << trial;
    if (!dp.ok()) {
      ++infeasible;
      EXPECT_EQ(dp.error().message, all.error().message);
      continue;
    }
    EXPECT_NEAR(dp->step_time_s, all->step_time_s, 1e-9 * all->step_time_s) << "trial " << trial;
    int64_t used = 0;
    std::vector<double> times;
    for (size_t i = 0; i < dp->stages.size(); ++i) {
      const auto& s = dp->stages[i];
      used += s.devices;
      times.push_back(s.cost.seconds);
      double held =
          in_flight(static_cast<int64_t>(dp->stages.size() - i), dp->micro_batches, dp->schedule);
      EXPECT_LE(s.cost.state_bytes + held * s.cost.activation_bytes, p.memory_limit + 1e-12);
      if (i > 0) {
        EXPECT_EQ(s.first, dp->stages[i - 1].last);
      }
      if (s.devices != dp->stages[0].devices) ++uneven;
    }
    EXPECT_EQ(used, p.devices);
    EXPECT_EQ(dp->stages.front().first, 0);
    EXPECT_EQ(dp->stages.back().last, p.layers);
    EXPECT_DOUBLE_EQ(*pipeline_step_time(times, dp->micro_batches, dp->schedule), dp->step_time_s);
    if (p.pinned_stages > 0) {
      EXPECT_EQ(static_cast<int64_t>(dp->stages.size()), p.pinned_stages);
    }
    multi_stage += dp->stages.size() > 1;
  }
  EXPECT_GT(multi_stage, 10);
  EXPECT_LT(infeasible, 30);
}

TEST(InterOp, ScheduleFormulasAndBadInput) {
  EXPECT_DOUBLE_EQ(*pipeline_step_time({1, 2, 1}, 4, sched("1f1b")), 4 * 2 + 2);
  EXPECT_DOUBLE_EQ(*pipeline_step_time({1, 2, 1}, 4, sched("interleaved:2")), 4 * 2 + 1);
  EXPECT_DOUBLE_EQ(*pipeline_step_time({3, 3, 3}, 4, sched("zb-h1")), 4 * 3 + 2);
  EXPECT_DOUBLE_EQ(in_flight(4, 8, sched("1f1b")), 4);
  EXPECT_DOUBLE_EQ(in_flight(4, 2, sched("1f1b")), 2);
  EXPECT_DOUBLE_EQ(in_flight(4, 8, sched("interleaved:2")), 5.5);
  auto bad = pipeline_step_time({1}, 1, sched("gpipe"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("use 1f1b, interleaved:V or zb-h1"), std::string::npos);
  std::mt19937_64 rng(3);
  InterOpProblem p = random_problem(rng, 3, 4);
  p.memory_limit = 1e-6;
  auto none = solve_inter_op(p);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message.rfind("no pipeline fits in ", 0), 0u) << none.error().message;
}

}  // namespace
}  // namespace heddle::search

namespace heddle::search {
namespace {

// The water-filling split against every split of the units: the same least largest chunk time.
TEST(InterOp, BalancedLayerSplitMatchesEnumeration) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> extra(0, 3);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t C = 1 + trial % 4, units = C + trial % 7;
    std::vector<double> fixed(static_cast<size_t>(C));
    for (double& f : fixed) f = trial % 3 == 0 ? 0 : extra(rng);
    const double unit_s = trial % 5 == 0 ? 0.25 : 1.0;
    auto n = balance_layers(fixed, unit_s, units);
    ASSERT_EQ(static_cast<int64_t>(n.size()), C);
    int64_t sum = 0;
    double got = 0;
    for (size_t c = 0; c < n.size(); ++c) {
      EXPECT_GE(n[c], 1);
      sum += n[c];
      got = std::max(got, fixed[c] + static_cast<double>(n[c]) * unit_s);
    }
    EXPECT_EQ(sum, units);
    double best = 1e30;
    std::vector<int64_t> k(static_cast<size_t>(C), 1);
    std::function<void(size_t, int64_t)> walk = [&](size_t c, int64_t left) {
      if (c + 1 == k.size()) {
        k[c] = left;
        double worst = 0;
        for (size_t i = 0; i < k.size(); ++i)
          worst = std::max(worst, fixed[i] + static_cast<double>(k[i]) * unit_s);
        best = std::min(best, worst);
        return;
      }
      for (int64_t x = 1; left - x >= static_cast<int64_t>(k.size() - c - 1); ++x) {
        k[c] = x;
        walk(c + 1, left - x);
      }
    };
    walk(0, units);
    EXPECT_DOUBLE_EQ(got, best) << "trial " << trial;
  }
  // Heavy ends move layers to the middle; equal chunks split evenly, earlier chunks first.
  EXPECT_EQ(balance_layers({1.5, 0, 0, 2.5}, 1, 8), (std::vector<int64_t>{1, 3, 3, 1}));
  EXPECT_EQ(balance_layers({0, 0, 0}, 1, 7), (std::vector<int64_t>{3, 2, 2}));
}

}  // namespace
}  // namespace heddle::search
