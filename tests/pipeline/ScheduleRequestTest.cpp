// A schedule request (heddle/pipeline/ScheduleRequest.h): built-in names need a device count in
// bounds, file names load placement files; a baseline is built by name, otherwise the search runs,
// and an impossible request is refused before either.
#include <gtest/gtest.h>

#include "heddle/pipeline/ScheduleRequest.h"
#include "heddle/support/Limits.h"

namespace heddle::pipeline {
namespace {

TEST(ScheduleRequest, BuiltinsNeedADeviceCountInBounds) {
  auto p = resolve_placement("vshape", 4);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->num_devices, 4);
  auto none = resolve_placement("vshape", 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--devices is required for the built-in placement 'vshape'"),
            std::string::npos);
  auto many = resolve_placement("vshape", limits::kMaxScheduleDevices + 1);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().message.find("a schedule search handles"), std::string::npos);
  // Not a path and no built-in: the built-in error, which lists the known names.
  auto unknown = resolve_placement("zigzag", 4);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("vshape"), std::string::npos);
}

TEST(ScheduleRequest, PathsAreLoadedAsPlacementFiles) {
  auto missing = resolve_placement("no/such/placement.json", 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().to_string().find("no/such/placement.json"), std::string::npos);
}

TEST(ScheduleRequest, ABaselineIsBuiltByNameElseTheSearchRuns) {
  auto p = resolve_placement("vshape", 4);
  ASSERT_TRUE(p.ok());
  auto gpipe = make_schedule(*p, 8, 1e9, "gpipe", 10);
  ASSERT_TRUE(gpipe.ok()) << gpipe.error().to_string();
  EXPECT_EQ(gpipe->method, "baseline gpipe");
  EXPECT_GT(gpipe->period, 0);
  auto searched = make_schedule(*p, 8, 1e9, "", 10);
  ASSERT_TRUE(searched.ok()) << searched.error().to_string();
  EXPECT_EQ(searched->method.rfind("searched (", 0), 0u) << searched->method;
  EXPECT_FALSE(make_schedule(*p, 8, 1e9, "no-such-baseline", 10).ok());
  EXPECT_FALSE(make_schedule(*p, 0, 1e9, "", 10).ok());  // no micro-batches: refused first
}

}  // namespace
}  // namespace heddle::pipeline
