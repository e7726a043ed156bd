// Every zoo preset's training step (forward with loss, autodiff, AdamW) builds and verifies at the
// preset's default size, where it is only built, never run. Big graphs are the point: gradient
// rules read forward types while they append backward ops, and only a graph that grows its tables
// mid-rule exposes a reference held across an append (issue #20: resnet50 --train read freed
// memory). Each preset, shrunk through its overrides, also runs two steps in the interpreter. This
// binary runs under ASan in CI (Makefile: SANITIZE_CI_ASAN).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>

#include "common/TrainStepUtil.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle {
namespace {

TEST(ZooTrainStep, EveryPresetBuildsAndVerifiesAtDefaultSize) {
  ASSERT_FALSE(zoo::zoo_entries().empty());
  for (const auto& e : zoo::zoo_entries()) {
    SCOPED_TRACE(e.name);
    auto fwd = zoo::build_zoo_model(e.name, {}, {.with_loss = true});
    ASSERT_TRUE(fwd.ok()) << fwd.error().to_string();
    auto step = build_train_step(*fwd);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    EXPECT_TRUE(verify(step->graph).empty());
    EXPECT_FALSE(step->updates.empty());
    // Params the loss reaches get an update (MoE gates only route, so theirs get none), each
    // with two AdamW state tensors.
    EXPECT_LE(step->updates.size(), fwd->params().size());
    EXPECT_GE(step->updates.size() * 10, fwd->params().size() * 9);
    EXPECT_EQ(step->graph.params().size(), fwd->params().size() + 2 * step->updates.size());
    EXPECT_GT(step->graph.num_ops(), 2 * fwd->num_ops());
  }
}

// Preset `name` with every size override shrunk (2 layers, width 32, sequence 8, vocabulary 64,
// batch 1); an override the preset does not take (its diagnostic says so) is dropped, so a new
// preset is covered without a table here.
Result<Graph> build_shrunk(const std::string& name) {
  zoo::ZooOverrides ov;
  ov.layers = 2;
  ov.hidden = 32;
  ov.heads = 4;
  ov.kv_heads = 2;
  ov.ffn = 64;
  ov.seq = 8;
  ov.vocab = 64;
  ov.batch = 1;
  ov.experts = 4;
  std::vector<std::pair<const char*, std::optional<int64_t>*>> fields = {
      {"layers", &ov.layers}, {"hidden", &ov.hidden},     {"heads", &ov.heads},
      {"seq", &ov.seq},       {"vocab", &ov.vocab},       {"batch", &ov.batch},
      {"ffn", &ov.ffn},       {"kv-heads", &ov.kv_heads}, {"experts", &ov.experts}};
  for (size_t attempt = 0;; ++attempt) {
    auto g = zoo::build_zoo_model(name, ov, {.with_loss = true});
    if (g.ok() || attempt > fields.size()) return g;
    bool dropped = false;
    for (auto [flag, field] : fields)
      if (g.error().message.find("override --" + std::string(flag) + " does not apply") !=
          std::string::npos) {
        field->reset();
        dropped = true;
      }
    if (!dropped) return g;
  }
}

// Every preset's training step, shrunk, runs: a finite loss, every parameter moved by the
// optimizer, and a second step on the same batch with the updated parameters lowers the loss.
// One test per preset (ResNet-50's 2048-channel stages stay wide: its overrides shrink only the
// bottleneck width and the batch).
class ZooTrainStepShrunk : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooTrainStepShrunk, RunsTwoStepsInTheInterpreter) {
  auto fwd = build_shrunk(GetParam());
  ASSERT_TRUE(fwd.ok()) << fwd.error().to_string();
  TrainStepOptions to;
  to.adamw.lr = 1e-3;
  auto step = build_train_step(*fwd, to);
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  ASSERT_TRUE(verify(step->graph).empty()) << verify(step->graph)[0].to_string();
  Interpreter it(step->graph);
  // Integer inputs (token ids, labels) below 10: every preset has at least 10 classes.
  auto inputs = random_inputs(step->graph, 7, 10);
  std::vector<double> losses;
  for (int s = 1; s <= 2; ++s) {
    auto r = it.run(inputs, s);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    losses.push_back((*r)[0].f32()[0]);
    ASSERT_TRUE(std::isfinite(losses.back()));
    size_t k = 1, moved = 0;
    for (const auto& u : step->updates) {
      const Tensor& before = it.param(u.param);
      const Tensor& after = (*r)[k];
      for (int64_t i = 0; i < after.numel(); ++i)
        if (after.f32()[i] != before.f32()[i]) {
          ++moved;
          break;
        }
      k += 1 + u.state.size();
    }
    testing::apply_updates(it, *step, *r);
    EXPECT_EQ(moved, step->updates.size());
  }
  EXPECT_LT(losses[1], losses[0]);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> v;
  for (const auto& e : zoo::zoo_entries()) v.push_back(e.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTrainStepShrunk, ::testing::ValuesIn(preset_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s;
                           for (char c : i.param) s += std::isalnum(c) ? c : '_';
                           return s;
                         });

}  // namespace
}  // namespace heddle
