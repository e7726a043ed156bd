// Issue #23, property tests over generated op forms (tests/common/RandomForms.h): every form the
// generator writes verifies, and its kernels (the fast path, the reference walker, the direct
// loops, random sub-box pieces) compute the textbook meaning of its attributes; every broken twin
// is refused with a diagnostic naming the op and the rule; every form either trains (gradients
// match finite differences) or is refused for training naming the form that trains.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "OpsTestUtil.h"
#include "common/RandomForms.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"

namespace heddle {
namespace {

constexpr uint64_t kForms = 1000;  // 100 per family

// The op under test: the one defining %y.
OpId op_of_y(const Graph& g) {
  for (OpId i = 0; i < g.num_ops(); ++i)
    if (g.value(g.op(i).results[0].value).name == "y") return i;
  return -1;
}

TEST(OpForms, EveryGeneratedFormVerifiesAndComputesItsTextbookMeaning) {
  std::mt19937 rng(23);
  std::map<std::string, int> seen;
  for (uint64_t seed = 0; seed < kForms; ++seed) {
    testing::OpForm f = testing::random_form(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + f.family + "\n" + f.text);
    auto g = parse_graph(f.text, "form.hd");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    auto diags = verify(*g);
    ASSERT_TRUE(diags.empty()) << diags.front().to_string();
    OpId id = op_of_y(*g);
    ASSERT_GE(id, 0);
    std::vector<Tensor> inputs;
    for (const auto& o : g->op(id).inputs)
      inputs.push_back(testing::random_tensor(g->type(o.value), rng));
    Tensor want = f.textbook(inputs);
    kernels::KernelOptions fast, walker, direct;
    walker.reference = true;
    direct.direct_conv = true;
    EXPECT_LT(testing::max_rel_diff(testing::run_whole(*g, id, inputs, fast)[0], want), 1e-4)
        << "fast";
    EXPECT_LT(testing::max_rel_diff(testing::run_whole(*g, id, inputs, walker)[0], want), 1e-4)
        << "walker";
    EXPECT_LT(testing::max_rel_diff(testing::run_whole(*g, id, inputs, direct)[0], want), 1e-4)
        << "direct";
    for (bool acc : {false, true})
      EXPECT_LT(testing::max_rel_diff(testing::run_pieces(*g, id, inputs, rng, acc)[0], want), 1e-4)
          << "pieces" << (acc ? " accumulated" : "");
    ++seen[f.family.substr(0, f.family.find('('))];
  }
  for (const auto& fam : testing::form_families()) EXPECT_EQ(seen[fam], 100) << fam;
}

TEST(OpForms, EveryBrokenTwinIsRefusedNamingTheOpAndTheRule) {
  int twins = 0;
  for (uint64_t seed = 0; seed < kForms; ++seed) {
    testing::OpForm f = testing::random_form(seed);
    if (f.broken_text.empty()) continue;
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + f.family + "\n" + f.broken_text);
    auto g = parse_graph(f.broken_text, "broken.hd");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    auto diags = verify(*g);
    ASSERT_FALSE(diags.empty());
    const std::string m = diags.front().to_string();
    EXPECT_EQ(m.rfind("broken.hd:", 0), 0u) << m;  // located at the op
    EXPECT_NE(m.find("defining %y: "), std::string::npos) << m;
    EXPECT_NE(m.find(f.broken_expect), std::string::npos) << m;
    ++twins;
  }
  EXPECT_EQ(twins, 900);  // every family but global_avgpool has a twin
}

// Gradients of the loss through each form against finite differences (fewer forms: each check
// runs the interpreter twice per sampled element).
TEST(OpForms, EveryFormTrainsOrNamesTheFormThatTrains) {
  std::mt19937 rng(23);
  int trained = 0, refused = 0;
  for (uint64_t seed = 0; seed < kForms / 4; ++seed) {
    testing::OpForm f = testing::random_form(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + " " + f.family + "\n" + f.text);
    auto g = parse_graph(f.text, "form.hd");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    if (!f.trains) {
      auto step = build_train_step(*g);
      ASSERT_FALSE(step.ok());
      EXPECT_NE(step.error().message.find("the form that trains"), std::string::npos)
          << step.error().message;
      ++refused;
      continue;
    }
    testing::check_gradients(*g, g->outputs()[0], -1, 1, rng);
    ++trained;
  }
  EXPECT_GE(trained, 100);
  EXPECT_GE(refused, 1);
}

}  // namespace
}  // namespace heddle
