// load_model(): the three sources (zoo, text IR, ONNX) and the diagnostics for options given to a
// source that does not take them.
#include <gtest/gtest.h>

#include <fstream>

#include "heddle/model/LoadModel.h"

namespace heddle::model {
namespace {

// A request for `source` with the given dims and nothing else.
ModelRequest req(const std::string& source, std::map<std::string, int64_t> dims = {}) {
  ModelRequest r;
  r.source = source;
  r.dims = std::move(dims);
  return r;
}

std::string data(const std::string& name) {
  return std::string(HEDDLE_SOURCE_DIR) + "/tests/" + name;
}

TEST(LoadModel, ZooPresetWithOverrides) {
  ModelRequest r;
  r.source = "gpt-tiny";
  r.overrides.layers = 3;
  auto three = load_model(r);
  ASSERT_TRUE(three.ok()) << three.error().to_string();
  EXPECT_FALSE(three->from_onnx);
  EXPECT_TRUE(three->weights.empty());
  r.overrides.layers = 5;
  auto five = load_graph(r);
  ASSERT_TRUE(five.ok());
  EXPECT_GT(five->params().size(), three->graph.params().size());
}

TEST(LoadModel, ZooWithLossHasOneOutput) {
  ModelRequest r = req("gpt-tiny");
  r.options.with_loss = true;
  auto g = load_graph(r);
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(g->outputs().size(), 1u);
}

TEST(LoadModel, UnknownNameListsThePresets) {
  auto g = load_model(req("no-such-model"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().to_string().find("gpt-tiny"), std::string::npos) << g.error().to_string();
}

TEST(LoadModel, OnnxFileCarriesWeights) {
  auto m = load_model(req(data("data/mlp.onnx"), {{"batch", 2}}));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_TRUE(m->from_onnx);
  EXPECT_FALSE(m->weights.empty());
  EXPECT_TRUE(m->missing_weights.empty());
}

TEST(LoadModel, OverridesRejectedForFiles) {
  ModelRequest r = req(data("data/mlp.onnx"), {{"batch", 2}});
  r.overrides.layers = 2;
  auto m = load_model(r);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("apply to zoo models only"), std::string::npos);
}

TEST(LoadModel, DimsRejectedForZooAndText) {
  auto zoo = load_model(req("gpt-tiny", {{"batch", 2}}));
  ASSERT_FALSE(zoo.ok());
  EXPECT_NE(zoo.error().to_string().find("--dim applies to ONNX models only"), std::string::npos);
  std::string path = std::string(HEDDLE_BINARY_DIR) + "/load_model_test.hd";
  {
    std::ofstream f(path);
    f << "graph g {\n  input %x: f32[8, 16]\n  %y: f32[8, 16] = relu [m=8, n=16] %x(m, n) -> (m, "
         "n)\n  output %y\n}\n";
  }
  auto text = load_model(req(path));
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  EXPECT_EQ(text->graph.outputs().size(), 1u);
  auto with_dims = load_model(req(path, {{"batch", 2}}));
  ASSERT_FALSE(with_dims.ok());
}

TEST(LoadModel, UnknownOnnxDimNamed) {
  auto m = load_model(req(data("data/mlp.onnx"), {{"batch", 2}, {"nosuch", 4}}));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("no dynamic dim named 'nosuch'"), std::string::npos)
      << m.error().to_string();
}

TEST(LoadModel, TextGraphWithoutOutputsRejected) {
  auto m = load_model(req(data("bad_inputs/no_output.hd")));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("has no outputs"), std::string::npos)
      << m.error().to_string();
}

}  // namespace
}  // namespace heddle::model
