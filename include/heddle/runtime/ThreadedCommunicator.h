// Collectives between threads of one process through shared memory: members publish their
// tiles, meet at a barrier, build their outputs from the published tiles, meet again.
#pragma once

#include <atomic>
#include <barrier>
#include <memory>

#include "heddle/runtime/Communicator.h"

namespace heddle {

/// The shared state of `n` thread-devices; endpoint(i) is device i's Communicator.
class ThreadedWorld {
 public:
  /// Precondition: n >= 1.
  explicit ThreadedWorld(int64_t n);
  ~ThreadedWorld();
  int64_t size() const { return n_; }
  /// Device i's end. Precondition: 0 <= i < size(). Owned by the world.
  Communicator& endpoint(int64_t i);
  /// Marks the world failed (a device hit an error): pending and later collectives of every
  /// device return a diagnostic instead of exchanging data, so no thread waits forever.
  void abort(int64_t device);

 private:
  class Endpoint;
  friend class Endpoint;
  int64_t n_;
  std::barrier<> barrier_;
  std::vector<const Tensor*> slots_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<int64_t> failed_{-1};
};

}  // namespace heddle
