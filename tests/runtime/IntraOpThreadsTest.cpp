// One device on 1, 2 and 3 intra-op threads (ExecOptions::threads): the own loops and sgemms run
// split over the device's pool, and a training step's outputs (loss, updated parameters, AdamW
// state) are bitwise the same run after run, and at every thread count where the split products
// are oneDNN's (kernels::onednn_sgemm_first(): AVX-512 hosts). OpenBLAS's (AVX2-only hosts) round
// a block of a product differently from the whole, so there the thread counts agree to rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
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

// The fraction of elements of float tensor `a` further than 1e-4 (absolute plus relative) from
// `b`'s (1 when the shapes differ; NaN on both sides agrees). A step's AdamW update is lr *
// sign(gradient) on its first step, so a gradient rounded across zero moves its parameter by 2 lr:
// a few such elements are rounding, most of them a wrong product.
double far_fraction(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.is_int() || b.is_int()) return same_bits(a, b) ? 0.0 : 1.0;
  int64_t far = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.f32()[i], y = b.f32()[i];  // NaN on both sides (random AdamW state) agrees
    far += !(std::abs(x - y) <= 1e-4 * (1.0 + std::abs(y)) || (std::isnan(x) && std::isnan(y)));
  }
  return a.numel() ? static_cast<double>(far) / static_cast<double>(a.numel()) : 0.0;
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
    std::map<int, TensorMap> first;  // each thread count's first run
    for (int threads : {2, 3, 2, 3}) {
      auto many = run_threaded(g, *programs, feeds, {.optimizer_step = 1, .threads = threads});
      ASSERT_TRUE(many.ok()) << many.error().to_string();
      ASSERT_EQ(many->size(), one->size());
      for (const auto& [v, t] : *one) {
        const std::string what = g.value(v).name + " on " + std::to_string(threads) + " threads";
        if (kernels::onednn_sgemm_first()) {
          EXPECT_TRUE(same_bits(many->at(v), t)) << what << " differs from 1 thread";
        } else {
          EXPECT_LT(far_fraction(many->at(v), t), 0.01) << what << " far from 1 thread";
        }
      }
      auto [it, fresh] = first.emplace(threads, *many);
      if (!fresh) {
        for (const auto& [v, t] : it->second)
          EXPECT_TRUE(same_bits(many->at(v), t)) << g.value(v).name << " not repeatable";
      }
    }
  }
}

}  // namespace
}  // namespace heddle
