// The intra-op pool: every task runs once whatever the thread count, nesting runs serially,
// exceptions come back to the caller, and no call uses more threads than it asks for.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "heddle/support/ThreadPool.h"

namespace heddle {
namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnceAtAnyThreadCount) {
  for (int threads = 1; threads <= 4; ++threads)
    for (int64_t tasks = 0; tasks <= 40; ++tasks)
      for (int rep = 0; rep < 5; ++rep) {
        std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
        parallel_for(threads, tasks, [&](int64_t i) { runs[i].fetch_add(1); });
        for (int64_t i = 0; i < tasks; ++i)
          ASSERT_EQ(runs[i].load(), 1) << threads << " threads, " << tasks << " tasks, task " << i;
      }
}

TEST(ThreadPool, NestedCallsRunSeriallyInsideATask) {
  std::vector<std::atomic<int>> runs(64);
  parallel_for(3, 8, [&](int64_t i) {
    parallel_for(3, 8, [&](int64_t j) { runs[i * 8 + j].fetch_add(1); });
  });
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(ThreadPool, TheLowestFailingTasksExceptionReachesTheCaller) {
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> ran{0};
    try {
      parallel_for(2, 10, [&](int64_t i) {
        ran.fetch_add(1);
        if (i == 3 || i == 7) throw std::runtime_error("task " + std::to_string(i));
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 3");
    }
    EXPECT_EQ(ran.load(), 10);  // the other tasks still ran; the pool stays usable
  }
  std::atomic<int> after{0};
  parallel_for(2, 5, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 5);
}

TEST(ThreadPool, TasksRunOnAtMostThreadsThreads) {
  for (int threads = 2; threads <= 3; ++threads)
    for (int rep = 0; rep < 3; ++rep) {
      std::mutex mu;
      std::set<std::thread::id> ids;
      parallel_for(threads, 64, [&](int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      });
      EXPECT_GE(ids.size(), 1u);
      EXPECT_LE(ids.size(), static_cast<size_t>(threads));
    }
}

TEST(ThreadPool, EachCallingThreadHasItsOwnPool) {
  std::vector<std::thread> ts;
  std::atomic<int64_t> sum{0};
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) parallel_for(2, 16, [&](int64_t i) { sum += i; });
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(sum.load(), 3 * 50 * 120);
}

}  // namespace
}  // namespace heddle
