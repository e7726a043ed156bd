// Every zoo preset's training step (forward with loss, autodiff, AdamW) builds and verifies at the
// preset's default size, where it is only built, never run. Big graphs are the point: gradient
// rules read forward types while they append backward ops, and only a graph that grows its tables
// mid-rule exposes a reference held across an append (issue #20: resnet50 --train read freed
// memory). This binary runs under ASan in CI (Makefile: SANITIZE_CI_ASAN).
#include <gtest/gtest.h>

#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
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

}  // namespace
}  // namespace heddle
