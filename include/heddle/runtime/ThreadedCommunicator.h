// Collectives between threads of one process through shared memory: members publish their
// tiles, meet at a barrier, build their outputs from the published tiles, and meet again before
// returning (or, in one-barrier mode, leave their tiles untouched until their next collective).
#pragma once

#include <atomic>
#include <barrier>
#include <memory>

#include "heddle/runtime/Communicator.h"

namespace heddle {

/// The shared state of `n` thread-devices; endpoint(i) is device i's Communicator.
class ThreadedWorld {
 public:
  /// Precondition: n >= 1. With `one_barrier` false (default) a collective meets its peers twice
  /// and `mine` may be reused as soon as it returns. With `one_barrier` true it meets them once
  /// (half the wake-ups on a busy host): peers may still read `mine` until they arrive at their
  /// next collective, so the caller must leave `mine` unchanged until its own next collective on
  /// this world has returned, or until every device has finished (ThreadedRunner plans its tiles
  /// so). Slots alternate between two sets, so the next collective's publication never overwrites
  /// one a slow peer is still reading.
  explicit ThreadedWorld(int64_t n, bool one_barrier = false);
  ~ThreadedWorld();
  int64_t size() const { return n_; }
  /// Device i's end. Precondition: 0 <= i < size(). Owned by the world.
  Communicator& endpoint(int64_t i);
  /// Marks the world failed (a device hit an error): pending and later collectives of every
  /// device return a diagnostic instead of exchanging data, so no thread waits forever.
  void abort(int64_t device);
  /// Clears an abort, for the next step. Precondition: no collective is in progress.
  void reset() { failed_.store(-1); }

 private:
  class Endpoint;
  friend class Endpoint;
  int64_t n_;
  bool one_barrier_;
  std::barrier<> barrier_;
  std::vector<const Tensor*> slots_;  // two sets of n: [parity * n + rank]
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<int64_t> failed_{-1};
};

}  // namespace heddle
