#include <gtest/gtest.h>

#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {
namespace {

constexpr double kUnlimited = 1e9;

ScheduleStats stats_of(const std::string& baseline, const BlockPlacement& p, int m) {
  auto b = build_baseline(baseline, p, m);
  EXPECT_TRUE(b.ok()) << baseline << ": " << b.error().to_string();
  EXPECT_TRUE(validate_schedule(p, b->schedule, kUnlimited).ok())
      << baseline << ": " << validate_schedule(p, b->schedule, kUnlimited).error().to_string();
  return compute_stats(p, b->schedule);
}

TEST(Baselines, OneFOneBClosedForm) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 2, 4, 8, 16}) {
      BlockPlacement pl = make_vshape(p, 1, 1);
      auto st = stats_of("1f1b", pl, m);
      EXPECT_EQ(st.makespan, 2 * (m + p - 1)) << "p=" << p << " m=" << m;
      EXPECT_NEAR(st.bubble_fraction, double(p - 1) / (m + p - 1), 1e-12);
      for (int d = 0; d < p; ++d) EXPECT_EQ(st.peak_memory[d], std::min(p - d, m));
      // F=1, B=2: (m + p - 1)(F + B).
      EXPECT_EQ(stats_of("1f1b", make_vshape(p), m).makespan, 3 * (m + p - 1));
    }
  }
}

TEST(Baselines, GPipeClosedForm) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 4, 8}) {
      auto st = stats_of("gpipe", make_vshape(p, 1, 1), m);
      EXPECT_EQ(st.makespan, 2 * (m + p - 1));
      EXPECT_NEAR(st.bubble_fraction, double(p - 1) / (m + p - 1), 1e-12);
      for (double peak : st.peak_memory) EXPECT_EQ(peak, m);  // all m activations in flight
    }
  }
}

TEST(Baselines, InterleavedClosedForm) {
  // Megatron's interleaved 1F1B: (mV + p - 1)(f + b) with f, b per chunk; bubble
  // (p - 1) / (mV + p - 1), a V-th of 1F1B's.
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {2 * p, 4 * p}) {
        auto st = stats_of("interleaved", make_interleaved(p, v), m);
        EXPECT_EQ(st.makespan, 3 * (m * v + p - 1)) << "p=" << p << " v=" << v << " m=" << m;
        EXPECT_NEAR(st.bubble_fraction, double(p - 1) / (m * v + p - 1), 1e-12);
      }
    }
  }
}

TEST(Baselines, ZeroBubbleClosedForms) {
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 4 * p}) {
      // F = B = W = 1: ZB-H1 adds (p - 1)(F + B - W) to m(F + B + W), at 1F1B's memory (p).
      auto h1 = stats_of("zb-h1", make_vshape_zb(p), m);
      EXPECT_EQ(h1.makespan, 3 * m + (p - 1)) << "p=" << p << " m=" << m;
      for (double peak : h1.peak_memory) EXPECT_LE(peak, p);
      EXPECT_EQ(h1.peak_memory[0], p);
      // F = 1, B = 2, W = 1: ZB-H1 (p - 1)(F + B - W) = 2(p - 1); ZB-H2 (p - 1)(F + B - 2W)
      // = p - 1 with at most 2p - 1 in flight.
      BlockPlacement zb = make_vshape_zb(p, 1, 2, 1);
      EXPECT_EQ(stats_of("zb-h1", zb, m).makespan, 4 * m + 2 * (p - 1)) << "p=" << p << " m=" << m;
      auto h2 = stats_of("zb-h2", zb, m);
      for (double peak : h2.peak_memory) EXPECT_LE(peak, 2 * p - 1);
      // ZB-H2's extra warm-up forwards need m >= 2p - 1 micro-batches to fill the bubble.
      if (m >= 2 * p - 1) {
        EXPECT_EQ(h2.makespan, 4 * m + (p - 1)) << "p=" << p << " m=" << m;
      }
    }
  }
}

TEST(Baselines, ChimeraAndSequentialAreValid) {
  for (int p : {2, 4}) {
    auto ch = stats_of("chimera", make_xshape(p), 8);
    auto gp = stats_of("gpipe", make_xshape(p), 8);
    EXPECT_LE(ch.makespan, gp.makespan);
    auto seq = stats_of("sequential", make_vshape(p), 3);
    EXPECT_EQ(seq.makespan, 3 * 3 * p);  // one micro-batch (3p) after another
    for (double peak : seq.peak_memory) EXPECT_EQ(peak, 1);
  }
}

TEST(Baselines, ApplicabilityAndErrors) {
  EXPECT_EQ(applicable_baselines(make_vshape(4), 8),
            (std::vector<std::string>{"gpipe", "1f1b", "sequential"}));
  EXPECT_EQ(applicable_baselines(make_vshape_zb(4), 8),
            (std::vector<std::string>{"gpipe", "zb-h1", "zb-h2", "sequential"}));
  EXPECT_EQ(applicable_baselines(make_interleaved(4, 2), 6),
            (std::vector<std::string>{"gpipe", "sequential"}));
  auto bad = build_baseline("1f1b", make_kshape(4), 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("does not apply"), std::string::npos);
  auto unknown = build_baseline("pipedream", make_vshape(4), 4);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown baseline"), std::string::npos);
  auto uneven = build_baseline("interleaved", make_interleaved(4, 2), 6);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("multiple of the device count"), std::string::npos);
}

TEST(Baselines, GPipeAppliesToEveryBuiltin) {
  for (const char* name : {"mshape", "kshape", "nnshape", "xshape", "vshape-zb"}) {
    auto p = builtin_placement(name, 4);
    ASSERT_TRUE(p.ok());
    stats_of("gpipe", *p, 5);
    stats_of("sequential", *p, 5);
  }
}

}  // namespace
}  // namespace heddle::pipeline
