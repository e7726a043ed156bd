// Micro-batch chunks in flight per device, walked from the schedules the pipeline library builds
// (peak_in_flight()), against counts done by hand from each schedule's definition: 1F1B's
// `p - d`, Megatron's interleaved warm-up count plus one, ZB-H1's delayed weight gradients,
// GPipe's every micro-batch.
#include <gtest/gtest.h>

#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/Schedule.h"

namespace heddle::pipeline {
namespace {

std::vector<int> in_flight(const BlockPlacement& p, const std::string& baseline, int m) {
  auto s = build_baseline(baseline, p, m);
  EXPECT_TRUE(s.ok()) << baseline;
  return peak_in_flight(p, s->schedule);
}

TEST(InFlight, OneFOneBHoldsPMinusDOnDeviceD) {
  const int p = 4, m = 8;
  // Device d runs p - 1 - d warm-up forwards, then one forward before its first backward: p - d
  // micro-batches' activations at once, whatever the spans.
  for (double bwd : {1.0, 2.0, 3.0}) {
    auto got = in_flight(make_vshape(p, 1, bwd), "1f1b", m);
    EXPECT_EQ(got, (std::vector<int>{4, 3, 2, 1})) << "backward span " << bwd;
  }
  // Fewer micro-batches than stages: every micro-batch is in flight on device 0.
  EXPECT_EQ(in_flight(make_vshape(p), "1f1b", 2), (std::vector<int>{2, 2, 2, 1}));
}

TEST(InFlight, InterleavedHoldsMegatronsWarmupPlusOne) {
  // Megatron-LM's interleaved schedule: device d runs (p - d - 1) * 2 + (v - 1) * p warm-up
  // forward chunks, then alternates; its peak is the warm-up count plus one chunk.
  const int p = 4, v = 2, m = 8;
  auto got = in_flight(make_interleaved(p, v), "interleaved", m);
  std::vector<int> hand;
  for (int d = 0; d < p; ++d) hand.push_back((p - d - 1) * 2 + (v - 1) * p + 1);
  EXPECT_EQ(hand, (std::vector<int>{11, 9, 7, 5}));
  EXPECT_EQ(got, hand);
  // v = 3: 14, 12, 10, 8 chunks.
  EXPECT_EQ(in_flight(make_interleaved(p, 3), "interleaved", m), (std::vector<int>{15, 13, 11, 9}));
}

TEST(InFlight, ZeroBubbleAndGPipe) {
  const int p = 4, m = 8;
  // ZB-H1: the weight gradient, which frees a micro-batch, runs d backwards late on device d, so
  // every device holds p micro-batches (p - d from 1F1B plus d waiting for their W).
  EXPECT_EQ(in_flight(make_vshape_zb(p), "zb-h1", m), (std::vector<int>{4, 4, 4, 4}));
  // ZB-H2 is built under a cap of 2p - 1 micro-batches per device; device 0 reaches it.
  auto h2 = in_flight(make_vshape_zb(p), "zb-h2", m);
  EXPECT_EQ(h2[0], 2 * p - 1);
  for (int x : h2) EXPECT_LE(x, 2 * p - 1);
  // GPipe: every forward before any backward.
  EXPECT_EQ(in_flight(make_vshape(p), "gpipe", m), (std::vector<int>{8, 8, 8, 8}));
}

}  // namespace
}  // namespace heddle::pipeline
