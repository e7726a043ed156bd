// The threaded collectives' barrier: every phase holds every thread until the last arrives, with
// or without spinning, and with more threads than cores the waiters sleep instead of spinning;
// all-reduces over a world with more devices than cores still sum exactly.
#include <gtest/gtest.h>

#include <thread>

#include "heddle/runtime/HostCores.h"
#include "heddle/runtime/ThreadedCommunicator.h"

namespace heddle {
namespace {

// `n` threads pass `phases` phases; in each, every thread adds 1 to `count` before the barrier
// and checks after it that all n did.
void expect_barrier_holds(int64_t n, int spin, int phases) {
  WaitBarrier barrier(n, spin);
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> bad{0};
  auto body = [&] {
    for (int p = 1; p <= phases; ++p) {
      count.fetch_add(1);
      barrier.arrive_and_wait();
      if (count.load() < n * p) bad.fetch_add(1);
      barrier.arrive_and_wait();  // nobody starts phase p+1 before everyone has checked
    }
  };
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < n; ++t) threads.emplace_back(body);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0) << n << " threads, spin " << spin;
  EXPECT_EQ(count.load(), n * phases);
}

TEST(WaitBarrier, HoldsEveryPhaseSpinningOrSleeping) {
  expect_barrier_holds(1, WaitBarrier::kDefaultSpin, 100);
  expect_barrier_holds(2, WaitBarrier::kDefaultSpin, 500);
  expect_barrier_holds(3, 0, 500);
  expect_barrier_holds(8, 0, 200);
  expect_barrier_holds(5, 10, 200);
}

TEST(WaitBarrier, SleepsRatherThanSpinsWhenThreadsOutnumberCores) {
  // A peer that arrives late (here: 20 ms) is waited for asleep, whatever the spin budget.
  WaitBarrier barrier(2, WaitBarrier::kDefaultSpin);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    barrier.arrive_and_wait();
  });
  barrier.arrive_and_wait();
  late.join();
  EXPECT_EQ(barrier.sleeps(), 1);
  // A world with more devices than cores does not spin at all: every waiter of a phase sleeps
  // unless it arrives last.
  const int64_t n = host_cores() + 2;
  ThreadedWorld world(n, false);
  std::vector<float> got(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::vector<int64_t> group;
  for (int64_t d = 0; d < n; ++d) group.push_back(d);
  for (int64_t d = 0; d < n; ++d)
    threads.emplace_back([&, d] {
      Tensor mine(DType::kF32, IVec({1}));
      mine.f32()[0] = static_cast<float>(d + 1);
      Tensor out(DType::kF32, IVec({1}));
      for (int k = 0; k < 50; ++k) {
        Status st =
            world.endpoint(d).collective(Collective::kAllReduce, group, mine, out, Monoid::kSum);
        EXPECT_TRUE(st.ok());
      }
      got[static_cast<size_t>(d)] = out.f32()[0];
    });
  for (auto& t : threads) t.join();
  for (float v : got) EXPECT_EQ(v, static_cast<float>(n * (n + 1) / 2));
  // 100 phases (two barriers per collective); in each, the last thread to arrive does not sleep
  // and, with spinning off, every other one does unless the last arrives in the instant between
  // its arrival and its check.
  EXPECT_LE(world.barrier().sleeps(), 100 * (n - 1));
  EXPECT_GE(world.barrier().sleeps(), 50 * (n - 1));
}

}  // namespace
}  // namespace heddle
