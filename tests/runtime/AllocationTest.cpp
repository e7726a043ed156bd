// Steady-state steps of a ThreadedRunner allocate nothing in the executor: this binary replaces the
// global operator new with a counter and runs forward and training steps of gpt-tiny on one and
// two devices. Allocations inside kernel calls (the kernels' own scratch: operand descriptors,
// im2col and packing buffers) are counted apart and reported; they are the kernels' business.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedRunner.h"
#include "heddle/sharding/Tactics.h"

namespace {

std::atomic<bool> counting{false};
std::atomic<int64_t> outside_kernels{0}, inside_kernels{0};

void count() {
  if (!counting.load(std::memory_order_relaxed)) return;
  (heddle::in_kernel_call() ? inside_kernels : outside_kernels).fetch_add(1);
}

void* allocate(size_t n) {
  count();
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  return p;
}

void* allocate_aligned(size_t n, std::align_val_t a) {
  count();
  size_t al = static_cast<size_t>(a);
  void* p = std::aligned_alloc(al, (std::max<size_t>(n, 1) + al - 1) / al * al);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void* operator new(size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace heddle {
namespace {

struct Counts {
  int64_t outside = 0, inside = 0;
};

// Runs steps 2..4 of `g` lowered for `strategy` on `devices` devices (step 1 warms up) and returns
// the allocations of the last three steps. Training graphs feed their updated parameters and
// optimizer state back, in place, as a training loop does.
Counts steady_state(const Graph& g, const std::vector<ParamUpdate>& updates, const char* strategy,
                    int64_t devices, const LowerOptions& lowering = {}) {
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok());
  auto mesh = spec->mesh(devices);
  EXPECT_TRUE(mesh.ok());
  auto plan = plan_from_strategy(g, *mesh, *spec);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  auto programs = lower(g, plan->plan, lowering);
  EXPECT_TRUE(programs.ok());
  TensorMap feeds = testing::random_feeds(g, 5), outs;
  ThreadedRunner runner(g, *programs);
  Counts c;
  for (int step = 1; step <= 4; ++step) {
    ExecOptions o{.optimizer_step = updates.empty() ? 0 : step};
    if (step == 2) {
      outside_kernels = 0;
      inside_kernels = 0;
      counting = true;
    }
    Status st = runner.run_into(feeds, outs, o);
    for (const auto& u : updates) {
      feeds.at(u.param).copy_from(outs.at(u.updated));
      for (const auto& s : u.state) feeds.at(s.first).copy_from(outs.at(s.second));
    }
    counting = false;
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    counting = step >= 2;
  }
  counting = false;
  c.outside = outside_kernels;
  c.inside = inside_kernels;
  std::printf("%s on %lld device(s): %lld allocations outside kernels, %lld inside, in 3 steps\n",
              strategy, static_cast<long long>(devices), static_cast<long long>(c.outside),
              static_cast<long long>(c.inside));
  return c;
}

Graph gpt(bool loss) {
  zoo::ModelOptions mo;
  mo.with_loss = loss;
  auto g = zoo::build_zoo_model("gpt-tiny", zoo::ZooOverrides::sized(4), mo);
  EXPECT_TRUE(g.ok());
  return std::move(*g);
}

TEST(Allocation, ForwardStepsAllocateNothingInTheExecutor) {
  Graph g = gpt(false);
  EXPECT_EQ(steady_state(g, {}, "dp=1", 1).outside, 0);
  EXPECT_EQ(steady_state(g, {}, "dp=2", 2).outside, 0);
  EXPECT_EQ(steady_state(g, {}, "tp=2", 2).outside, 0);
  EXPECT_EQ(steady_state(g, {}, "cp=2", 2).outside, 0);  // ring steps, posted to another thread
}

TEST(Allocation, TrainingStepsAllocateNothingInTheExecutor) {
  auto step = build_train_step(gpt(true));
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  EXPECT_EQ(steady_state(step->graph, step->updates, "dp=1", 1).outside, 0);
  EXPECT_EQ(steady_state(step->graph, step->updates, "dp=2", 2).outside, 0);
  EXPECT_EQ(steady_state(step->graph, step->updates, "tp=2", 2).outside, 0);
  // Outputs assembled from the devices' tiles (as `heddle run` lowers for threads).
  LowerOptions tiles;
  tiles.replicate_outputs = false;
  EXPECT_EQ(steady_state(step->graph, step->updates, "dp=2,zero=1", 2, tiles).outside, 0);
  EXPECT_EQ(steady_state(step->graph, step->updates, "tp=2", 2, tiles).outside, 0);
}

// The counter works: a step of a fresh runner (which builds its executors) does allocate.
TEST(Allocation, TheCounterSeesTheExecutorsAllocations) {
  Graph g = gpt(false);
  auto spec = StrategySpec::parse("dp=2");
  auto mesh = spec->mesh(2);
  auto plan = plan_from_strategy(g, *mesh, *spec);
  ASSERT_TRUE(plan.ok());
  auto programs = lower(g, plan->plan);
  ASSERT_TRUE(programs.ok());
  TensorMap feeds = testing::random_feeds(g, 5);
  outside_kernels = 0;
  counting = true;
  auto out = run_threaded(g, *programs, feeds);
  counting = false;
  ASSERT_TRUE(out.ok());
  EXPECT_GT(outside_kernels.load(), 100);
}

}  // namespace
}  // namespace heddle
