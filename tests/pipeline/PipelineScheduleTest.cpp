// The strategy's pipeline schedule: parsed once (the bare `interleaved` rule included), printed
// back canonically, and the one placement every user (simulator, runtime) builds from it.
#include <gtest/gtest.h>

#include <unordered_set>

#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/PipelineSchedule.h"

namespace heddle::pipeline {
namespace {

TEST(PipelineSchedule, ParsesEveryKindAndPrintsItBack) {
  const struct {
    const char* text;
    ScheduleKind kind;
    int64_t chunks;
  } cases[] = {{"gpipe", ScheduleKind::kGpipe, 1},
               {"1f1b", ScheduleKind::k1f1b, 1},
               {"interleaved:3", ScheduleKind::kInterleaved, 3},
               {"zb-h1", ScheduleKind::kZbH1, 1},
               {"zb-h2", ScheduleKind::kZbH2, 1},
               {"searched", ScheduleKind::kSearched, 1}};
  for (const auto& c : cases) {
    auto s = PipelineSchedule::parse(c.text);
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.error().to_string();
    EXPECT_EQ(*s, (PipelineSchedule{c.kind, c.chunks})) << c.text;
    EXPECT_EQ(s->to_string(), c.text);
    EXPECT_EQ(*PipelineSchedule::parse(s->to_string()), *s);
  }
  EXPECT_EQ(PipelineSchedule{}, (PipelineSchedule{ScheduleKind::k1f1b, 1}));
  EXPECT_TRUE(PipelineSchedule::parse("zb-h2")->split_backward());
  EXPECT_FALSE(PipelineSchedule::parse("interleaved:2")->split_backward());
  EXPECT_EQ(PipelineSchedule::parse("interleaved:4")->baseline(), "interleaved");
  EXPECT_EQ(PipelineSchedule::parse("zb-h1")->baseline(), "zb-h1");
}

// The one rule for a bare `interleaved`: two chunks per stage, in the strategy language and in
// `heddle schedule --placement` alike.
TEST(PipelineSchedule, BareInterleavedMeansTwoChunksEverywhere) {
  auto bare = PipelineSchedule::parse("interleaved");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, *PipelineSchedule::parse("interleaved:2"));
  EXPECT_EQ(bare->to_string(), "interleaved:2");
  auto placement = builtin_placement("interleaved", 4);
  ASSERT_TRUE(placement.ok()) << placement.error().to_string();
  EXPECT_EQ(*placement, make_interleaved(4, 2));
}

TEST(PipelineSchedule, RejectsWhatItDoesNotKnowAndSaysWhatIs) {
  EXPECT_EQ(PipelineSchedule::parse("zigzag").error().message,
            "unknown schedule 'zigzag'; known: gpipe, 1f1b, interleaved:V, zb-h1, zb-h2, searched");
  for (const char* bad : {"interleaved:0", "interleaved:65", "interleaved:x",
                          "interleaved:", "1F1B", "interleaved:2x", ""}) {
    EXPECT_FALSE(PipelineSchedule::parse(bad).ok()) << bad;
  }
  EXPECT_NE(PipelineSchedule::parse("interleaved:0").error().message.find("1 to 64"),
            std::string::npos);
  EXPECT_TRUE(PipelineSchedule::parse("interleaved:64").ok());
  EXPECT_FALSE(builtin_placement("interleaved:0", 4).ok());
}

TEST(PipelineSchedule, HashFollowsEquality) {
  std::unordered_set<PipelineSchedule> set;
  for (const char* t : {"gpipe", "1f1b", "interleaved:2", "interleaved", "interleaved:3", "zb-h1"})
    set.insert(*PipelineSchedule::parse(t));
  EXPECT_EQ(set.size(), 5u);
}

TEST(PipelineSchedule, PlacementIsTheShapeOfTheSchedule) {
  using K = ScheduleKind;
  EXPECT_EQ(schedule_placement({K::k1f1b, 1}, 3, true), make_vshape(3));
  EXPECT_EQ(schedule_placement({K::kGpipe, 1}, 3, true), make_vshape(3));
  EXPECT_EQ(schedule_placement({K::kInterleaved, 2}, 3, true), make_interleaved(3, 2));
  EXPECT_EQ(schedule_placement({K::kInterleaved, 1}, 3, true), make_interleaved(3, 1));
  EXPECT_EQ(schedule_placement({K::kZbH1, 1}, 3, true), make_vshape_zb(3));
  EXPECT_EQ(schedule_placement({K::kZbH2, 1}, 3, true), make_vshape_zb(3));
  // Forward only: a chain over stages x chunks blocks, chunk c on stage c % stages.
  BlockPlacement f = schedule_placement({K::kInterleaved, 2}, 3, false);
  EXPECT_EQ(f.family, "forward");
  EXPECT_EQ(f.num_devices, 3);
  ASSERT_EQ(f.blocks.size(), 6u);
  for (int c = 0; c < 6; ++c) {
    EXPECT_EQ(f.blocks[c].name, "f" + std::to_string(c));
    EXPECT_EQ(f.blocks[c].devices, std::vector<int>{c % 3});
  }
  EXPECT_EQ(f.deps.size(), 5u);
  EXPECT_TRUE(check_placement(f).ok());
  EXPECT_EQ(schedule_placement({K::kZbH1, 1}, 2, false).blocks.size(), 2u);
}

}  // namespace
}  // namespace heddle::pipeline
