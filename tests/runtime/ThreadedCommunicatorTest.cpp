// The threaded collectives' barrier: every phase holds every thread until the last arrives, with
// or without spinning, and with more threads than cores the waiters sleep instead of spinning;
// all-reduces over a world with more devices than cores still sum exactly; batches whose large sums
// the members split between them give the group-order sums bit for bit.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <thread>

#include "heddle/ops/Kernel.h"
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

// Device d's tile of `shape` in round r: values only d, r and the shape's size determine.
Tensor device_tile(int64_t d, int r, const IVec& shape) {
  std::mt19937_64 rng(static_cast<uint64_t>(d * 1000 + r) * 7919 +
                      static_cast<uint64_t>(shape.product()));
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
  return t;
}

// A batch over the whole world: a sum large enough to be split between the members, a small one,
// a max (never split) and an all-gather, in several rounds; every result equals combining the
// members' tiles in group order in one place. Tiles and batches live until every device is done
// (in one-barrier mode peers read them until their next meeting).
void expect_split_batches_exact(int64_t n, bool one_barrier) {
  ThreadedWorld world(n, one_barrier);
  std::vector<int64_t> group;
  for (int64_t d = 0; d < n; ++d) group.push_back(d);
  const IVec big{3, 20011}, small{5, 7};
  constexpr int kRounds = 6;
  std::vector<std::deque<Tensor>> tiles(static_cast<size_t>(n));
  std::vector<std::deque<std::vector<CollectiveCall>>> batches(static_cast<size_t>(n));
  std::atomic<int64_t> bad{0};
  auto body = [&](int64_t d) {
    std::deque<Tensor>& keep = tiles[static_cast<size_t>(d)];
    auto tile = [&](Tensor t) -> Tensor& { return keep.emplace_back(std::move(t)); };
    for (int r = 0; r < kRounds; ++r) {
      Box part = Box::of_shape(small).split_part(0, n, d);
      Tensor& big_t = tile(device_tile(d, r, big));
      Tensor& small_t = tile(device_tile(d, r, small));
      Tensor& max_t = tile(device_tile(d, r + 100, small));
      Tensor& gather_t = tile(device_tile(0, r, small).crop(part));
      Tensor& big_o = tile(Tensor(DType::kF32, big));
      Tensor& small_o = tile(Tensor(DType::kF32, small));
      Tensor& max_o = tile(Tensor(DType::kF32, small));
      Tensor& gather_o = tile(Tensor(DType::kF32, small));
      const std::vector<CollectiveCall>& calls =
          batches[static_cast<size_t>(d)].emplace_back(std::vector<CollectiveCall>{
              {Collective::kAllReduce, &group, &big_t, &big_o, Monoid::kSum},
              {Collective::kAllReduce, &group, &small_t, &small_o, Monoid::kSum},
              {Collective::kAllReduce, &group, &max_t, &max_o, Monoid::kMax},
              {Collective::kAllGather, &group, &gather_t, &gather_o, Monoid::kSum},
          });
      if (!world.endpoint(d).collectives(calls).ok()) bad.fetch_add(1);
      Tensor want_big = device_tile(0, r, big), want_small = device_tile(0, r, small),
             want_max = device_tile(0, r + 100, small);
      for (int64_t q = 1; q < n; ++q) {
        kernels::combine(Monoid::kSum, want_big, device_tile(q, r, big));
        kernels::combine(Monoid::kSum, want_small, device_tile(q, r, small));
        kernels::combine(Monoid::kMax, want_max, device_tile(q, r + 100, small));
      }
      if (!(big_o == want_big) || !(small_o == want_small) || !(max_o == want_max) ||
          !(gather_o == device_tile(0, r, small)))
        bad.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < n; ++d) threads.emplace_back(body, d);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0) << n << " devices, one_barrier " << one_barrier;
}

TEST(ThreadedWorld, SplitSumsOfLargeBatchesAreTheGroupOrderSumsBitForBit) {
  for (bool one_barrier : {false, true}) {
    expect_split_batches_exact(2, one_barrier);
    expect_split_batches_exact(3, one_barrier);
  }
}

}  // namespace
}  // namespace heddle
