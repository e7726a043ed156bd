// The model layer's description for costing: repeating layers of zoo presets come from the zoo's
// own configs (not from family names), fixed graphs are not layered.
#include <gtest/gtest.h>

#include "heddle/model/ScalableModel.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle::model {
namespace {

TEST(ScalableModel, RepeatingLayersOfPresets) {
  struct Case {
    const char* name;
    int64_t layers, unit;
    bool gpt;
  };
  for (const Case& c : {Case{"gpt-tiny", 2, 1, true}, Case{"llama2-7b", 32, 1, false},
                        Case{"vit-b16", 12, 1, false}, Case{"gshard-moe", 12, 2, false},
                        Case{"resnet-tiny", 0, 1, false}, Case{"mlp", 0, 1, false}}) {
    auto m = zoo_scalable_model(c.name, {});
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.error().to_string();
    EXPECT_EQ(m->layers, c.layers) << c.name;
    EXPECT_EQ(m->unit, c.unit) << c.name;
    EXPECT_EQ(m->gpt.has_value(), c.gpt) << c.name;
    EXPECT_TRUE(m->rebuilds_batch);
  }
}

TEST(ScalableModel, LayerOverrideAndRebuild) {
  zoo::ZooOverrides o;
  o.layers = 6;
  o.batch = 4;
  auto m = zoo_scalable_model("llama-tiny", o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layers, 6);
  EXPECT_EQ(m->batch, 4);
  auto two = m->build(2, 1), four = m->build(4, 1);
  ASSERT_TRUE(two.ok() && four.ok());
  EXPECT_GT(four->params().size(), two->params().size());
  EXPECT_EQ(two->type(two->inputs().front()).shape()[0], 1);
  auto loss = m->build_loss(2, 1);
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(loss->outputs().size(), 1u);
}

TEST(ScalableModel, OverrideThePresetDoesNotTake) {
  zoo::ZooOverrides o;
  o.vocab = 10;
  auto m = zoo_scalable_model("vit-tiny", o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("--vocab does not apply"), std::string::npos)
      << m.error().to_string();
  auto layers = zoo::zoo_layers("no-such-model");
  ASSERT_FALSE(layers.ok());
}

TEST(ScalableModel, FixedGraphIsNotLayered) {
  ModelRequest r;
  r.source = std::string(HEDDLE_SOURCE_DIR) + "/tests/data/mlp.onnx";
  r.dims = {{"batch", 3}};
  auto m = load_scalable_model(r);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->layers, 0);
  EXPECT_EQ(m->batch, 3);
  EXPECT_FALSE(m->rebuilds_batch);
  // An ONNX model's training step appends a loss (auto: cross-entropy on the logits).
  ASSERT_TRUE(m->build_loss);
  auto with_loss = m->build_loss(0, 3);
  ASSERT_TRUE(with_loss.ok()) << with_loss.error().to_string();
  ASSERT_EQ(with_loss->outputs().size(), 1u);
  EXPECT_EQ(with_loss->type(with_loss->outputs()[0]).rank(), 0);
  // With a batch override it re-batches, and rebuilds at any batch.
  r.dims.clear();
  r.overrides.batch = 16;
  auto rebatched = load_scalable_model(r);
  ASSERT_TRUE(rebatched.ok()) << rebatched.error().to_string();
  EXPECT_TRUE(rebatched->rebuilds_batch);
  EXPECT_EQ(rebatched->batch, 16);
  auto at5 = rebatched->build(0, 5);
  ASSERT_TRUE(at5.ok()) << at5.error().to_string();
  EXPECT_EQ(at5->type(at5->inputs()[0]).shape()[0], 5);
  r.overrides.batch.reset();
  r.dims = {{"batch", 3}};
  r.source = "gpt-tiny";
  auto zoo_with_dims = load_scalable_model(r);
  ASSERT_FALSE(zoo_with_dims.ok());
}

}  // namespace
}  // namespace heddle::model
