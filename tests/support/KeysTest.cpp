// Strict JSON keys: the closest valid key for typos, abbreviations and expansions.
#include <gtest/gtest.h>

#include "heddle/support/Keys.h"

namespace heddle {
namespace {

TEST(Keys, ClosestName) {
  const std::vector<std::string> placement = {"devices", "blocks", "deps"};
  EXPECT_EQ(closest_name("dependencies", placement), "deps");
  EXPECT_EQ(closest_name("device", placement), "devices");
  EXPECT_EQ(closest_name("Blocks", placement), "blocks");
  const std::vector<std::string> block = {"name", "type", "span", "memory", "devices"};
  EXPECT_EQ(closest_name("mem", block), "memory");
  EXPECT_EQ(closest_name("spam", block), "span");
  const std::vector<std::string> cluster = {"name", "device", "count", "devices_per_node"};
  EXPECT_EQ(closest_name("devices_per_nodes", cluster), "devices_per_node");
  EXPECT_EQ(closest_name("x", {}), "");
}

TEST(Keys, CheckKeysNamesTheFileTheObjectAndTheValidKeys) {
  EXPECT_TRUE(check_keys({"span", "name"}, {"name", "span"}, "p.json", "").ok());
  auto s = check_keys({"name", "mem"}, {"name", "memory"}, "p.json", "blocks[0]");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string(),
            "p.json: error: unknown key 'mem' in blocks[0]; did you mean 'memory'? (valid keys: "
            "name, memory)");
}

}  // namespace
}  // namespace heddle
