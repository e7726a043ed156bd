// A failed assert on a device thread under throw_on_assert (the Python module's handler): the
// exception reaches the thread that started the run, no peer hangs, and the runner stays usable.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "common/RandomFeeds.h"
#include "heddle/ir/TextParser.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedRunner.h"
#include "heddle/support/Assert.h"

namespace heddle {
namespace {

std::mutex g_mu;
std::set<std::thread::id> g_threads;  // the threads whose assert failed

// throw_on_assert, noting the thread.
[[noreturn]] void note_and_throw(const AssertionFailure& f) {
  {
    std::lock_guard lock(g_mu);
    g_threads.insert(std::this_thread::get_id());
  }
  throw_on_assert(f);
}

TEST(InternalError, AnAssertOnDeviceThreadsReachesTheCallerAndTheRunnerStaysUsable) {
  // Row-parallel matmul: the devices meet in a reduce-scatter and an all-gather after the load.
  auto g = parse_graph(
      "graph mm {\n input %a: f32[4, 8]\n param %b: f32[8, 6]\n"
      " %c: f32[4, 6] = einsum{spec=\"mk,kn->mn\"} [m=4, n=6, k=8:sum] %a(m, k), %b(k, n) -> (m, "
      "n)\n output %c\n}");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  Mesh mesh = *Mesh::parse("tp=4");
  ShardingPlan plan{mesh, {OpStrategy({2})}, {}};
  auto progs = lower(*g, plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  ThreadedRunner runner(*g, *progs);
  TensorMap good = testing::random_feeds(*g, 3);
  TensorMap bad = good;
  bad.insert_or_assign(g->inputs()[0], Tensor(TensorType(DType::kI64, IVec({4, 8}))));

  AssertHandler old = set_assert_handler(note_and_throw);
  g_threads.clear();
  bool thrown = false;
  try {
    (void)runner.run(bad);  // every device's load copies an i64 feed into an f32 tile: asserts
  } catch (const InternalError& e) {
    thrown = true;
    EXPECT_STREQ(e.failure().condition, "src.is_int() == is_int() && src.rank() == rank()");
  }
  set_assert_handler(old);
  EXPECT_TRUE(thrown);
  EXPECT_EQ(g_threads.size(), 4u);  // on device 0 (this thread) and the three workers
  EXPECT_TRUE(g_threads.count(std::this_thread::get_id()));

  auto after = runner.run(good);
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  auto fresh = run_threaded(*g, *progs, good);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(after->at(g->outputs()[0]) == fresh->at(g->outputs()[0]));
}

}  // namespace
}  // namespace heddle
