#include "heddle/support/ThreadPool.h"

#include <atomic>
#include <climits>
#include <exception>
#include <mutex>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

thread_local bool t_in_task = false;  // inside a task (worker or caller): no nesting

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
#pragma omp parallel num_threads(team)
  {
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
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace pool_detail

}  // namespace heddle
