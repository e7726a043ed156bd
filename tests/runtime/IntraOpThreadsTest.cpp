// One device on 1, 2 and 3 intra-op threads (ExecOptions::threads): the own loops and sgemms run
// split over the device's pool, and a training step's outputs (loss, updated parameters, AdamW
// state) are bitwise the same at every thread count and run after run.
#include <gtest/gtest.h>

#include <cstring>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.is_int() ? static_cast<const void*>(a.i64()) : a.f32(),
                     b.is_int() ? static_cast<const void*>(b.i64()) : b.f32(),
                     static_cast<size_t>(a.numel()) * (a.is_int() ? 8 : 4)) == 0;
}

TEST(IntraOpThreads, TrainingStepsAreBitwiseTheSameOnOneTwoAndThreeThreads) {
  for (const char* name : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    zoo::ZooOverrides ov;  // large enough that the kernels split (KernelOptions::grain)
    ov.layers = 1;
    ov.hidden = 128;
    ov.seq = 64;
    ov.batch = 4;
    zoo::ModelOptions mo;
    mo.with_loss = true;
    auto fwd = zoo::build_zoo_model(name, ov, mo);
    ASSERT_TRUE(fwd.ok()) << fwd.error().to_string();
    auto step = build_train_step(*fwd);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    const Graph& g = step->graph;
    auto spec = StrategySpec::parse("dp=1");
    ASSERT_TRUE(spec.ok());
    auto mesh = spec->mesh(1);
    ASSERT_TRUE(mesh.ok());
    auto plan = plan_from_strategy(g, *mesh, *spec);
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    auto programs = lower(g, plan->plan);
    ASSERT_TRUE(programs.ok());
    TensorMap feeds = testing::random_feeds(g, 7);
    auto one = run_threaded(g, *programs, feeds, {.optimizer_step = 1, .threads = 1});
    ASSERT_TRUE(one.ok()) << one.error().to_string();
    for (int threads : {2, 3, 2}) {
      auto many = run_threaded(g, *programs, feeds, {.optimizer_step = 1, .threads = threads});
      ASSERT_TRUE(many.ok()) << many.error().to_string();
      ASSERT_EQ(many->size(), one->size());
      for (const auto& [v, t] : *one)
        EXPECT_TRUE(same_bits(many->at(v), t))
            << g.value(v).name << " differs on " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace heddle
