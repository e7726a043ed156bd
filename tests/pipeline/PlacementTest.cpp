#include <gtest/gtest.h>

#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/PlacementJson.h"

namespace heddle::pipeline {
namespace {

BlockPlacement two_blocks() {
  BlockPlacement p;
  p.num_devices = 2;
  p.blocks = {{"f0", "forward", 1, 1, {0}}, {"f1", "forward", 1, 1, {1}}};
  p.deps = {{0, 1}};
  return p;
}

TEST(BlockPlacement, AcceptsAValidPlacement) { EXPECT_TRUE(check_placement(two_blocks()).ok()); }

TEST(BlockPlacement, RejectsCycleAndNamesIt) {
  BlockPlacement p = two_blocks();
  p.deps.push_back({1, 0});
  auto st = check_placement(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cycle"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("f1 -> f0 -> f1"), std::string::npos) << st.error().message;
}

TEST(BlockPlacement, RejectsDeviceThatDoesNotExist) {
  BlockPlacement p = two_blocks();
  p.blocks[1].devices = {2};
  auto st = check_placement(p, "x.json");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().to_string(),
            "x.json: error: block 'f1' is on device 2, which does not exist: the placement has 2 "
            "devices (0 to 1)");
}

TEST(BlockPlacement, RejectsZeroAndNegativeSpans) {
  for (double span : {0.0, -1.0}) {
    BlockPlacement p = two_blocks();
    p.blocks[0].span = span;
    auto st = check_placement(p);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("spans must be positive"), std::string::npos);
  }
}

TEST(BlockPlacement, RejectsDuplicateNamesAndEmptyDevices) {
  BlockPlacement p = two_blocks();
  p.blocks[1].name = "f0";
  EXPECT_FALSE(check_placement(p).ok());
  p = two_blocks();
  p.blocks[0].devices.clear();
  EXPECT_FALSE(check_placement(p).ok());
}

TEST(BlockPlacement, ValueSemantics) {
  BlockPlacement a = make_vshape(4), b = make_vshape(4), c = make_vshape(4, 1, 1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a, c);
  EXPECT_NE(a.to_string().find("f0:forward[span=1, mem=1, dev=[0]]"), std::string::npos);
}

TEST(BuiltinPlacements, AllAreValidWithBalancedLoads) {
  for (const char* name : {"vshape", "interleaved:2", "interleaved:3", "vshape-zb", "xshape",
                           "mshape", "kshape", "nnshape"}) {
    for (int p : {2, 4, 8}) {
      auto pl = builtin_placement(name, p);
      ASSERT_TRUE(pl.ok()) << name << ": " << pl.error().to_string();
      EXPECT_TRUE(check_placement(*pl).ok()) << name;
      auto load = device_loads(*pl);
      for (double l : load) EXPECT_EQ(l, load[0]) << name << " p=" << p;
    }
  }
  EXPECT_EQ(make_vshape(4).blocks.size(), 8u);
  EXPECT_EQ(make_interleaved(4, 2).blocks.size(), 16u);
  EXPECT_EQ(make_vshape_zb(4).blocks.size(), 12u);
  EXPECT_EQ(make_xshape(4).blocks.size(), 16u);
  EXPECT_EQ(make_mshape(4).blocks[0].devices.size(), 4u);
}

TEST(BuiltinPlacements, BadNamesAndCounts) {
  EXPECT_FALSE(builtin_placement("wshape", 4).ok());
  EXPECT_EQ(*builtin_placement("interleaved", 4), make_interleaved(4, 2));  // bare: V = 2
  EXPECT_FALSE(builtin_placement("interleaved:0", 4).ok());
  EXPECT_FALSE(builtin_placement("interleaved:x", 4).ok());
  EXPECT_FALSE(builtin_placement("kshape", 3).ok());
  EXPECT_FALSE(builtin_placement("xshape", 1).ok());
  EXPECT_FALSE(builtin_placement("vshape", 0).ok());
  EXPECT_NE(builtin_placement("wshape", 4).error().message.find("vshape"), std::string::npos);
}

constexpr const char* kExample = R"({
  "devices": 2,
  "blocks": [
    {"name": "f0", "type": "forward",  "span": 1, "memory": 1,  "devices": [0]},
    {"name": "f1", "type": "forward",  "span": 1.5, "memory": 1,  "devices": [1]},
    {"name": "b1", "type": "backward", "span": 2, "memory": -1, "devices": [1]},
    {"name": "b0", "type": "backward", "span": 2, "memory": -1, "devices": [0]},
    {"name": "all", "span": 1, "devices": [0, 1]}
  ],
  "deps": [["f0", "f1"], ["f1", "b1"], ["b1", "b0"], ["b0", "all"]]
})";

TEST(PlacementJson, ParsesTheDocumentedFormat) {
  auto p = parse_placement_json(kExample, "p.json");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->num_devices, 2);
  ASSERT_EQ(p->blocks.size(), 5u);
  EXPECT_EQ(p->blocks[1].span, 1.5);
  EXPECT_EQ(p->blocks[2].memory, -1);
  EXPECT_EQ(p->blocks[4].type, "forward");
  EXPECT_EQ(p->blocks[4].memory, 0);
  EXPECT_EQ(p->deps.size(), 4u);
  // Round trip.
  auto q = parse_placement_json(placement_to_json(*p), "p.json");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->blocks, p->blocks);
  EXPECT_EQ(q->deps, p->deps);
}

/// Parses `text` and returns the diagnostic text (empty when it parsed).
std::string parse_error(const std::string& text, int devices = 0) {
  auto p = parse_placement_json(text, "p.json", devices);
  return p.ok() ? "" : p.error().to_string();
}

TEST(PlacementJson, ReportsEachMistake) {
  EXPECT_NE(parse_error("{\n  \"devices\": 2,\n  \"blocks\": [ }").find("p.json:3:"),
            std::string::npos)
      << parse_error("{\n  \"devices\": 2,\n  \"blocks\": [ }");
  EXPECT_NE(parse_error("[]").find("JSON object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"blocks": []})").find("device count is missing"), std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": []})", 3).find("--devices is 3"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"span": 1, "devices": [0]}]})")
                .find("blocks[0] needs a string \"name\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "devices": [0]}]})")
                .find("blocks[0] ('a') needs a number \"span\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": 0, "devices": [0]}]})")
                .find("spans must be positive"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": -2, "devices": [0]}]})")
                .find("span is -2"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": 1, "devices": [5]}]})")
                .find("is on device 5, which does not exist"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": 1, "devices": []}]})")
                .find("non-empty list"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": 1, "devices": [0]}],
                            "deps": [["a", "zz"]]})")
                .find("deps[0] names block 'zz', which is not defined"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 1, "blocks": [{"name": "a", "span": 1, "devices": [0]},
                            {"name": "b", "span": 1, "devices": [0]}],
                            "deps": [["a", "b"], ["b", "a"]]})")
                .find("cycle"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"devices": 2, "blocks": [{"name": "a", "span": 1, "devices": [0]}],
                            "deps": [["a"]]})")
                .find("pair of block names"),
            std::string::npos);
}

TEST(PlacementJson, MissingFile) {
  auto p = load_placement_file("/nonexistent/p.json", 2);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(
      p.error().to_string(),
      "/nonexistent/p.json: error: cannot open the placement file: No such file or directory");
}

}  // namespace
}  // namespace heddle::pipeline
