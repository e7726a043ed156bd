// BlasThreads: scopes that set how many threads OpenBLAS runs each sgemm on. OpenBLAS's thread
// count is process-global, so the executor sets it around a run and restores it after.
#pragma once

#include <cstdint>

namespace heddle {

/// A scope in which OpenBLAS runs each call on `threads` threads (the caller and threads - 1 of
/// its pool). The executor gives each device `threads_per_device()` cores: with one device on two
/// cores OpenBLAS uses both; with as many devices as cores each device's calls run on its own
/// thread (OpenBLAS's pool would oversubscribe the cores, and its callers would queue for the one
/// pool). einsum's sgemms no longer use it: they run as one-thread oneDNN sgemms on the device's
/// own pool (support/ThreadPool.h; one-thread OpenBLAS ones on AVX2-only hosts, see
/// device_blas_threads); OpenBLAS serves the im2col convolutions and fallbacks.
/// The previous count is restored on destruction. `threads < 1` changes nothing. Not for nesting
/// across threads: the setting is global.
class BlasThreads {
 public:
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_ = 0;  // the count to restore; 0 when unchanged
};

/// The OpenBLAS threads for a device of `threads` cores: `threads` where the contraction kernels'
/// one-thread products are oneDNN's (kernels::onednn_sgemm_first()), else 1: there the device's
/// own threads split each product into one-thread OpenBLAS calls, which OpenBLAS runs on the
/// calling thread only while set to one thread. Either way a product's results do not depend on
/// the device's thread count.
int device_blas_threads(int threads);

/// The number of threads OpenBLAS runs each call on now.
int blas_threads();

/// The former scope: OpenBLAS single-threaded while `devices > 1` device threads run (with one
/// device it changes nothing). Kept for callers that run their own device threads.
class SingleThreadedBlas {
 public:
  explicit SingleThreadedBlas(int64_t devices) : scope_(devices > 1 ? 1 : 0) {}

 private:
  BlasThreads scope_;
};

}  // namespace heddle
