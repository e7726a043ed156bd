// ThreadPool: the intra-op threads a device's kernels split their loops over. Each calling thread
// (a device thread, or the main thread with one device) owns its own pool, so devices never queue
// for one another's workers. Idle workers spin briefly, then sleep on a futex: a pool waiting for
// work, or a caller waiting for a descheduled worker, never burns the core another thread needs.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace heddle {

namespace pool_detail {
void run_tasks(int threads, int64_t tasks, void (*fn)(void*, int64_t), void* ctx);
}  // namespace pool_detail

/// Runs f(i) for every i in [0, tasks) on up to `threads` threads: the caller and threads - 1
/// workers of the calling thread's pool (started on first use, kept until the thread exits).
/// Tasks are claimed in index order by whichever thread is free, so a worker the scheduler left
/// out delays nothing: the caller then runs its tasks itself. Returns when every task has run.
/// Which thread runs a task is not fixed; callers make each task's result independent of that.
/// Runs serially (in index order, on the caller) when threads <= 1, tasks <= 1, or when called
/// from inside a task (no nesting). An exception thrown by a task is rethrown here after all
/// tasks finished (the one of the lowest task index). Precondition: tasks < 2^20.
template <class F>
void parallel_for(int threads, int64_t tasks, F&& f) {
  using Fn = std::remove_reference_t<F>;
  pool_detail::run_tasks(
      threads, tasks, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

/// How many times this thread's pool workers went to sleep on the futex (they spin first); lets
/// tests see that idle workers sleep.
int64_t pool_worker_sleeps();

/// Spin rounds (a pause each) a waiting worker or caller checks before it sleeps on the futex.
inline constexpr int kPoolSpin = 2000;

}  // namespace heddle
