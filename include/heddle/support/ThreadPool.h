// ThreadPool: the intra-op threads a device's kernels split their loops over: the OpenMP team of
// the calling thread (a device thread, or the main thread with one device), the same threads
// oneDNN's convolutions run on. Each calling thread has its own team, so devices never queue for
// one another's workers. One set of worker threads for both: a separate pool's workers would
// spin against oneDNN's OpenMP workers on the same cores (on a 1-device 2-core run its loops got
// half a second core). Idle workers wait as libgomp's OMP_WAIT_POLICY says (by default they spin
// a while, then sleep; PASSIVE: they sleep at once, which a busy host wants).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace heddle {

namespace pool_detail {
void run_tasks(int threads, int64_t tasks, void (*fn)(void*, int64_t), void* ctx);
}  // namespace pool_detail

/// Runs f(i) for every i in [0, tasks) on up to `threads` threads: the caller and threads - 1
/// workers of its OpenMP team (libgomp keeps them until the thread exits). Tasks are claimed in
/// index order by whichever thread is free, so a late worker runs few or none of them (it still
/// joins the team's closing barrier). Returns when every task has run.
/// Which thread runs a task is not fixed; callers make each task's result independent of that.
/// Runs serially (in index order, on the caller) when threads <= 1, tasks <= 1, or when called
/// from inside a task (no nesting). An exception thrown by a task is rethrown here after all
/// tasks finished (the one of the lowest task index). Precondition: tasks <= kMaxTasks.
template <class F>
void parallel_for(int threads, int64_t tasks, F&& f) {
  using Fn = std::remove_reference_t<F>;
  pool_detail::run_tasks(
      threads, tasks, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

/// The most tasks one parallel_for takes.
inline constexpr int64_t kMaxTasks = (int64_t{1} << 20) - 1;

}  // namespace heddle
