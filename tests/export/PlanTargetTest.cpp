// --target, --export and --memory-reserve applied to a cluster and a search: the reserve taken off
// each device's memory, the target's pins, and diagnostics that name the flag.
#include <gtest/gtest.h>

#include "heddle/export/PlanTarget.h"

namespace heddle::exporting {
namespace {

cost::Cluster a100() { return *cost::resolve_cluster("a100x64"); }

TargetFlags flags(std::string target, std::string export_format, std::string memory_reserve) {
  TargetFlags f;
  f.target = std::move(target);
  f.export_format = std::move(export_format);
  f.memory_reserve = std::move(memory_reserve);
  return f;
}

// The reserve is the allocator allowance's fixed part: by default the device's runtime memory
// (2 GB on an A100), nothing taken off the memory; given, it replaces that part on every kind.
TEST(PlanTarget, TheReserveIsTheAllowancesRuntimePart) {
  cost::Cluster c = a100();
  const double memory = c.device.memory_bytes;
  search::ConfigSearchOptions o;
  auto t = apply_target_flags({}, c, o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->target, Target::kAny);
  EXPECT_FALSE(t->export_to);
  EXPECT_EQ(t->reserve_bytes, 2e9);
  EXPECT_EQ(c.device.runtime_bytes, 2e9);
  EXPECT_EQ(c.device.memory_bytes, memory);
  cost::Cluster given = a100();
  auto six = apply_target_flags(flags("", "", "6GB"), given, o);
  ASSERT_TRUE(six.ok()) << six.error().to_string();
  EXPECT_EQ(six->reserve_bytes, 6e9);
  EXPECT_EQ(given.device.runtime_bytes, 6e9);
  EXPECT_EQ(given.device.memory_bytes, memory);
  EXPECT_EQ(given.device.fragmentation, c.device.fragmentation);
  cost::Cluster none = a100();
  auto zero = apply_target_flags(flags("", "", "0"), none, o);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->reserve_bytes, 0);
  EXPECT_EQ(none.device.runtime_bytes, 0);
}

TEST(PlanTarget, AnExportFormatIsAlsoTheTarget) {
  cost::Cluster c = a100();
  search::ConfigSearchOptions o;
  o.train = true;
  auto t = apply_target_flags(flags("", "megatron", "0"), c, o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->target, Target::kMegatron);
  EXPECT_EQ(t->export_to, Target::kMegatron);
  EXPECT_EQ(t->reserve_bytes, 0);
  EXPECT_TRUE(static_cast<bool>(o.admits));
}

TEST(PlanTarget, DiagnosticsNameTheFlag) {
  struct Case {
    TargetFlags flags;
    const char* want;
  } cases[] = {
      {flags("", "heddle", ""),
       "--export 'heddle' is not an export format; use megatron, torchtitan or deepspeed"},
      {flags("", "", "lots"), "--memory-reserve 'lots' is not a size"},
      {flags("", "", "1TiB"), "--memory-reserve 1.00 TiB leaves nothing of the"},
  };
  for (const Case& k : cases) {
    cost::Cluster c = a100();
    search::ConfigSearchOptions o;
    auto t = apply_target_flags(k.flags, c, o);
    ASSERT_FALSE(t.ok()) << k.want;
    EXPECT_NE(t.error().message.find(k.want), std::string::npos) << t.error().message;
  }
}

}  // namespace
}  // namespace heddle::exporting
