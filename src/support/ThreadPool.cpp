#include "heddle/support/ThreadPool.h"

#include <atomic>
#include <climits>
#include <exception>
#include <mutex>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

thread_local bool t_in_task = false;  // inside a task (worker or caller): no nesting

// ThreadSanitizer cannot see libgomp's barriers (libgomp is not instrumented): say where the
// team's threads synchronise, so that what a task reads or writes is ordered with the caller's
// accesses before and after parallel_for, and our own loops stay checked.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
void tsan_acquire(void* addr) { __tsan_acquire(addr); }
void tsan_release(void* addr) { __tsan_release(addr); }
#else
void tsan_acquire(void*) {}
void tsan_release(void*) {}
#endif

}  // namespace

namespace pool_detail {

void run_tasks(int threads, int64_t tasks, void (*fn)(void*, int64_t), void* ctx) {
  HEDDLE_ASSERT(tasks >= 0 && tasks <= kMaxTasks) << tasks << " tasks";
  if (threads <= 1 || tasks <= 1 || t_in_task) {
    for (int64_t i = 0; i < tasks; ++i) fn(ctx, i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  int64_t error_idx = INT64_MAX;
  const int team = static_cast<int>(std::min<int64_t>(threads, tasks));
  char start = 0, end = 0;  // the region's opening and closing barriers, for ThreadSanitizer
  tsan_release(&start);
#pragma omp parallel num_threads(team)
  {
    tsan_acquire(&start);
    t_in_task = true;
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
      try {
        fn(ctx, i);
      } catch (...) {  // an exception must not leave the parallel region
        std::lock_guard<std::mutex> lock(mu);
        if (i < error_idx) {
          error_idx = i;
          error = std::current_exception();
        }
      }
    }
    t_in_task = false;
    tsan_release(&end);
  }
  tsan_acquire(&end);
  if (error) std::rethrow_exception(error);
}

}  // namespace pool_detail

}  // namespace heddle
