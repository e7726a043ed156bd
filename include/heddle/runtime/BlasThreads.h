// SingleThreadedBlas: a scope in which OpenBLAS runs each sgemm on the calling thread only.
#pragma once

#include <cstdint>

namespace heddle {

/// While several device threads share the cores, each should run sgemm single-threaded: OpenBLAS's
/// own thread pool would oversubscribe the cores, and its callers queue for the one pool. Construct
/// one around a threaded run of `devices` device threads; with `devices <= 1` it changes nothing.
/// The previous thread count is restored on destruction. Not for nesting across threads.
class SingleThreadedBlas {
 public:
  explicit SingleThreadedBlas(int64_t devices);
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace heddle
