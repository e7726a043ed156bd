// The reference interpreter on the example graphs: deterministic, and equal to a direct
// computation of the same math.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/OpCost.h"

namespace heddle {
namespace {

std::string example(const std::string& name) {
  return std::string(HEDDLE_SOURCE_DIR) + "/examples/" + name;
}

TEST(Interpreter, ExamplesRunDeterministically) {
  for (const char* name : {"mlp.hd", "attention.hd", "convnet.hd"}) {
    SCOPED_TRACE(name);
    auto g = parse_graph_file(example(name));
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    ASSERT_TRUE(verify(*g).empty());
    auto in = random_inputs(*g, 3, 2);
    Interpreter a(*g, {});
    Interpreter b(*g, {});
    auto ra = a.run(in);
    auto rb = b.run(in);
    ASSERT_TRUE(ra.ok()) << ra.error().to_string();
    ASSERT_TRUE(rb.ok());
    ASSERT_EQ(ra->size(), g->outputs().size());
    for (size_t i = 0; i < ra->size(); ++i)
      EXPECT_TRUE((*ra)[i] == (*rb)[i]) << "not bitwise equal";
    EXPECT_GT(graph_flops(*g), 0);
  }
}

TEST(Interpreter, MlpEqualsDirectComputation) {
  auto g = parse_graph_file(example("mlp.hd"));
  ASSERT_TRUE(g.ok());
  Interpreter it(*g, {7, 1});
  auto in = random_inputs(*g, 11, 2);
  auto r = it.run(in);
  ASSERT_TRUE(r.ok());
  auto P = [&](const char* n) { return it.param(*g->find_value(n)); };
  const Tensor &x = in[0], &labels = in[1], &w1 = P("w1"), &b1 = P("b1"), &w2 = P("w2"),
               &b2 = P("b2"), &w3 = P("w3");
  // The example ends in its loss: the mean over the batch of logsumexp(logits) - logits[label].
  double loss = 0;
  for (int64_t m = 0; m < 64; ++m) {
    std::vector<double> a1(512), a2(512), lo(10);
    for (int64_t n = 0; n < 512; ++n) {
      double s = b1.f32()[n];
      for (int64_t k = 0; k < 784; ++k) s += double(x.f32()[m * 784 + k]) * w1.f32()[k * 512 + n];
      a1[n] = std::max(s, 0.0);
    }
    for (int64_t n = 0; n < 512; ++n) {
      double s = b2.f32()[n];
      for (int64_t k = 0; k < 512; ++k) s += a1[k] * w2.f32()[k * 512 + n];
      a2[n] = std::max(s, 0.0);
    }
    double den = 0;
    for (int64_t n = 0; n < 10; ++n) {
      for (int64_t k = 0; k < 512; ++k) lo[n] += a2[k] * w3.f32()[k * 10 + n];
      den += std::exp(lo[n]);
    }
    loss += std::log(den) - lo[static_cast<size_t>(labels.i64()[m])];
  }
  ASSERT_EQ((*r)[0].numel(), 1);
  EXPECT_NEAR((*r)[0].f32()[0], loss / 64, 1e-4);
}

TEST(Interpreter, WrongInputIsADiagnostic) {
  auto g = parse_graph_file(example("mlp.hd"));
  ASSERT_TRUE(g.ok());
  Interpreter it(*g);
  auto r = it.run({Tensor(DType::kF32, IVec{2, 2}), Tensor(DType::kI64, IVec{64})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("f32[64, 784]"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace heddle
