// A run's inputs as the runtime reads them: .npy files checked against the graph's inputs, the
// feeds a run starts from, and the digests that tell bit-identical outputs and parameters apart.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "heddle/frontend/Npy.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/RunInputs.h"

namespace heddle {
namespace {

Graph mlp() {
  zoo::ZooOverrides o;
  o.batch = 4;
  return *zoo::build_zoo_model("mlp", o);
}

TEST(RunInputs, FilesAreCheckedAgainstTheInputs) {
  Graph g = mlp();
  ASSERT_EQ(g.inputs().size(), 1u);
  const TensorType& want = g.type(g.inputs()[0]);
  std::string good = ::testing::TempDir() + "/run_inputs_good.npy";
  Tensor t(want);
  t.fill(0.5);
  ASSERT_TRUE(write_npy(good, t).ok());
  auto read = read_input_files(g, {good}, true);
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  ASSERT_EQ(read->tensors.size(), 1u);
  EXPECT_TRUE(read->tensors[0] == t);
  EXPECT_TRUE(read->warnings.empty());
  // Too many files, and a file of the wrong shape, name what is wrong.
  auto two = read_input_files(g, {good, good}, true);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().message.find("one .npy file per input"), std::string::npos);
  std::string wrong = ::testing::TempDir() + "/run_inputs_wrong.npy";
  ASSERT_TRUE(write_npy(wrong, Tensor(DType::kF32, IVec{3})).ok());
  auto bad = read_input_files(g, {wrong}, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().to_string().find(wrong), std::string::npos);
}

TEST(RunInputs, NonFiniteValuesAreAnErrorOnlyWhenCheckedAgainstAReference) {
  Graph g = mlp();
  Tensor t(g.type(g.inputs()[0]));
  t.fill(1);
  t.f32()[3] = std::numeric_limits<float>::quiet_NaN();
  std::string path = ::testing::TempDir() + "/run_inputs_nan.npy";
  ASSERT_TRUE(write_npy(path, t).ok());
  auto strict = read_input_files(g, {path}, true);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.error().message.find("NaN"), std::string::npos);
  auto lenient = read_input_files(g, {path}, false);
  ASSERT_TRUE(lenient.ok());
  ASSERT_EQ(lenient->warnings.size(), 1u);
  EXPECT_NE(lenient->warnings[0].message.find("not be finite"), std::string::npos);
}

TEST(RunInputs, FeedsFollowTheSeedAndTheWeights) {
  Graph g = mlp();
  std::vector<Tensor> inputs = random_inputs(g, 1, integer_range(g));
  TensorMap a = run_feeds(g, inputs, {}, 7), b = run_feeds(g, inputs, {}, 7),
            c = run_feeds(g, inputs, {}, 8);
  EXPECT_EQ(a.size(), g.inputs().size() + g.params().size());
  ValueId p = g.params()[0];
  EXPECT_TRUE(a.at(p) == b.at(p));
  EXPECT_FALSE(a.at(p) == c.at(p));
  EXPECT_TRUE(a.at(g.inputs()[0]) == inputs[0]);
  Tensor w(g.type(p));
  w.fill(0.25);
  TensorMap with = run_feeds(g, inputs, {{p, w}}, 7);
  EXPECT_TRUE(with.at(p) == w);  // a parameter with data is fed as given
}

// Every output of `g`, filled with `value`.
TensorMap filled_outputs(const Graph& g, double value) {
  TensorMap out;
  for (ValueId v : g.outputs()) {
    Tensor t(g.type(v));
    t.fill(value);
    out.emplace(v, t);
  }
  return out;
}

TEST(RunInputs, DigestTellsBitIdenticalOutputsApart) {
  Graph g = mlp();
  TensorMap out = filled_outputs(g, 1.5);
  TensorMap same = out;
  EXPECT_EQ(output_digest(g, out), output_digest(g, same));
  EXPECT_EQ(output_digest(g, out).size(), 16u);
  same.at(g.outputs()[0]).f32()[0] = std::nextafter(1.5f, 2.0f);  // one ulp
  EXPECT_NE(output_digest(g, out), output_digest(g, same));
}

// params_digest hashes the updated parameters only: the loss and optimizer state do not move it,
// one ulp of one parameter does.
TEST(RunInputs, ParamsDigestTellsBitIdenticalParametersApart) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto step = build_train_step(*zoo::build_zoo_model("mlp", {}, mo));
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  const Graph& g = step->graph;
  TensorMap out = filled_outputs(g, 0.25);
  TensorMap same = out;
  const std::string d = params_digest(step->updates, out);
  EXPECT_EQ(d.size(), 16u);
  EXPECT_EQ(d, params_digest(step->updates, same));
  same.at(g.outputs()[0]).f32()[0] = 7;                    // the loss
  same.at(step->updates[0].state[0].second).f32()[0] = 7;  // an AdamW moment
  EXPECT_EQ(d, params_digest(step->updates, same));
  same.at(step->updates.back().updated).f32()[0] = std::nextafter(0.25f, 1.0f);
  EXPECT_NE(d, params_digest(step->updates, same));
}

}  // namespace
}  // namespace heddle
