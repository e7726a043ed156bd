// Collectives between threads of one process through shared memory: members publish their
// tiles, meet at a barrier, build their outputs from the published tiles, and meet again before
// returning (or, in one-barrier mode, leave their tiles untouched until their next collective).
// A batch of collectives (Communicator::collectives) publishes all its tiles and meets once.
// The barrier spins briefly, then sleeps on a futex, so a waiting device never burns the core a
// late peer needs on a busy host.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "heddle/runtime/Communicator.h"

namespace heddle {

/// A reusable barrier of `n` threads. A waiter checks `spin` times (a pause between checks, a
/// few microseconds in all at the default) whether the last thread has arrived, then sleeps
/// (std::atomic::wait, a futex on Linux) until it does: spinning covers peers that arrive
/// moments later, sleeping leaves the core to a peer that is still computing.
class WaitBarrier {
 public:
  /// Spin rounds before sleeping when the host has a core per waiting thread.
  static constexpr int kDefaultSpin = 2000;
  /// Precondition: n >= 1, spin >= 0.
  WaitBarrier(int64_t n, int spin);
  /// Blocks until all `n` threads have called it for this phase.
  void arrive_and_wait();
  /// Futex waits so far (phases a thread slept in rather than saw end while spinning), for tests.
  int64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  const uint32_t n_;
  const int spin_;
  std::atomic<uint32_t> arrived_{0};
  std::atomic<uint32_t> phase_{0};
  std::atomic<int64_t> sleeps_{0};
};

/// The shared state of `n` thread-devices; endpoint(i) is device i's Communicator.
class ThreadedWorld {
 public:
  /// Precondition: n >= 1. With `one_barrier` false (default) a collective meets its peers twice
  /// and `mine` may be reused as soon as it returns. With `one_barrier` true it meets them once
  /// (half the wake-ups on a busy host): peers may still read `mine` until they arrive at their
  /// next collective, so the caller must leave `mine` unchanged until its own next collective on
  /// this world has returned, or until every device has finished (ThreadedRunner plans its tiles
  /// so). Slots alternate between two sets, so the next collective's publication never overwrites
  /// one a slow peer is still reading. Waiting peers spin WaitBarrier::kDefaultSpin rounds when
  /// the host has a core per running thread (host_cores() >= max(n, `threads`), `threads` being
  /// every device thread of the run, of this world or others), else sleep at once: with more
  /// devices than cores a spinning device only delays the peer it waits for. A batch over the whole
  /// world whose float sums of whole tiles hold at least 32768 elements is split: each member sums
  /// its share (in group order, bit-identical) into every member's result, then all meet once
  /// more (also in one-barrier mode).
  explicit ThreadedWorld(int64_t n, bool one_barrier = false, int64_t threads = 0);
  ~ThreadedWorld();
  int64_t size() const { return n_; }
  /// Device i's end. Precondition: 0 <= i < size(). Owned by the world.
  Communicator& endpoint(int64_t i);
  /// Marks the world failed (a device hit an error): pending and later collectives of every
  /// device return a diagnostic instead of exchanging data, so no thread waits forever.
  void abort(int64_t device);
  /// Clears an abort, for the next step. Precondition: no collective is in progress.
  void reset() { failed_.store(-1); }
  /// The barrier the collectives meet at (for tests).
  const WaitBarrier& barrier() const { return barrier_; }

 private:
  class Endpoint;
  friend class Endpoint;
  int64_t n_;
  bool one_barrier_;
  WaitBarrier barrier_;
  std::vector<const std::vector<CollectiveCall>*> slots_;  // two sets of n: [parity * n + rank]
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<int64_t> failed_{-1};
};

}  // namespace heddle
