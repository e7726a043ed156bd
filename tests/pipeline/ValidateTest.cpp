#include <gtest/gtest.h>

#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {
namespace {

// vshape on 2 devices, F=1 (+1), B=2 (-1): blocks f0 f1 b1 b0.
BlockPlacement vs2() { return make_vshape(2); }

// A valid 2-micro-batch schedule: 1F1B.
Schedule good() {
  //             f0 f1 b1 b0 | f0 f1 b1 b0
  return Schedule{2, 4, {0, 1, 2, 4, 1, 4, 5, 7}};
}

std::string violation(const Schedule& s, double limit = 10) {
  auto st = validate_schedule(vs2(), s, limit);
  return st.ok() ? "" : st.error().message;
}

TEST(Validate, AcceptsAValidSchedule) {
  EXPECT_EQ(violation(good()), "");
  EXPECT_EQ(violation(good(), 2), "");
}

TEST(Validate, CatchesBrokenDependency) {
  Schedule s = good();
  s.start[1] = 0.5;  // f1 of micro-batch 0 before f0 ends
  EXPECT_EQ(violation(s),
            "dependency broken: 'f1' of micro-batch 0 starts at 0.5 before its dependency 'f0' "
            "ends at 1");
}

TEST(Validate, CatchesTwoBlocksOnADevice) {
  Schedule s = good();
  s.start[4] = 0.5;  // f0 of micro-batch 1 overlaps f0 of micro-batch 0 on device 0
  s.start[5] = 4;
  EXPECT_NE(violation(s).find("device 0 runs two blocks at once"), std::string::npos)
      << violation(s);
}

TEST(Validate, CatchesMemoryAboveTheLimit) {
  EXPECT_EQ(violation(good(), 1),
            "device 0 needs memory 2 when 'f0' of micro-batch 1 starts at 1, above the limit 1");
}

TEST(Validate, CatchesShapeAndBadTimes) {
  Schedule s = good();
  s.start.pop_back();
  EXPECT_NE(violation(s).find("start times"), std::string::npos);
  s = good();
  s.start[0] = -1;
  EXPECT_NE(violation(s).find("must be finite and >= 0"), std::string::npos);
}

TEST(Validate, MultiDeviceBlocksOccupyEveryDevice) {
  BlockPlacement p = make_mshape(2);  // f_all on both devices first
  Schedule s{1, static_cast<int>(p.blocks.size()), {}};
  // f_all f0 f1 b1 b0 b_all
  s.start = {0, 1, 2, 3, 5, 7};
  EXPECT_TRUE(validate_schedule(p, s, 10).ok());
  s.start = {0, 1, 2, 3, 5, 6.5};  // b_all overlaps b0 on device 0
  EXPECT_FALSE(validate_schedule(p, s, 10).ok());
}

TEST(Stats, MakespanBubbleAndPeakMemory) {
  auto st = compute_stats(vs2(), good());
  EXPECT_EQ(st.makespan, 9);
  EXPECT_EQ(st.peak_memory, (std::vector<double>{2, 1}));
  EXPECT_DOUBLE_EQ(st.bubble_fraction, 1.0 - 12.0 / 18.0);
}

TEST(Stats, LeftJustifyKeepsOrderAndMemory) {
  Schedule late = good();
  for (double& t : late.start) t += 3;
  Schedule s = left_justify(vs2(), late);
  EXPECT_EQ(s, good());
}

TEST(Stats, LowerBoundIsTightForOneFOneB) {
  // 1F1B with F=1, B=2 reaches the lower bound 3(m + p - 1).
  EXPECT_EQ(makespan_lower_bound(make_vshape(4), 8), 33);
  EXPECT_EQ(makespan_lower_bound(make_vshape(2), 2), 9);
}

}  // namespace
}  // namespace heddle::pipeline
