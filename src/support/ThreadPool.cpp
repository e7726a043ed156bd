#include "heddle/support/ThreadPool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Sleeps while *w == v (or until woken; callers re-check).
void futex_wait(std::atomic<uint32_t>* w, uint32_t v) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* w, int n) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// The claim word packs the job's generation (24 bits), task count and next task index (20 bits
// each), so a worker that wakes late can never claim a task of a later job.
constexpr uint64_t kIdxBits = 20, kMask = (uint64_t{1} << kIdxBits) - 1, kGenMask = (1u << 24) - 1;
uint64_t pack(uint32_t gen, uint64_t n, uint64_t idx) {
  return (static_cast<uint64_t>(gen & kGenMask) << (2 * kIdxBits)) | (n << kIdxBits) | idx;
}

thread_local bool t_in_task = false;  // inside a task (worker or caller): no nesting

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Pool() {
    stop_.store(true, std::memory_order_seq_cst);
    gen_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&gen_, INT_MAX);
    for (auto& t : threads_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }
  int64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

  void run(int64_t n, void (*fn)(void*, int64_t), void* ctx) {
    fn_ = fn;
    ctx_ = ctx;
    error_ = nullptr;
    error_idx_ = INT64_MAX;
    done_.store(0, std::memory_order_relaxed);
    const uint32_t g = gen_.load(std::memory_order_relaxed) + 1;
    claim_.store(pack(g, static_cast<uint64_t>(n), 0), std::memory_order_release);
    gen_.store(g, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(&gen_, INT_MAX);
    claim_tasks(g);
    const auto target = static_cast<uint32_t>(n);
    for (int i = 0; i < kPoolSpin && done_.load(std::memory_order_acquire) != target; ++i)
      cpu_relax();
    for (uint32_t d; (d = done_.load(std::memory_order_acquire)) != target;) futex_wait(&done_, d);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Claims and runs tasks of job `g` until none is left.
  void claim_tasks(uint32_t g) {
    while (true) {
      uint64_t v = claim_.load(std::memory_order_acquire);
      const uint64_t idx = v & kMask, n = (v >> kIdxBits) & kMask;
      if (((v >> (2 * kIdxBits)) & kGenMask) != (g & kGenMask) || idx >= n) return;
      if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
      // The job cannot finish before this task does, so fn_ and ctx_ are this job's.
      t_in_task = true;
      try {
        fn_(ctx_, static_cast<int64_t>(idx));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (static_cast<int64_t>(idx) < error_idx_) {
          error_idx_ = static_cast<int64_t>(idx);
          error_ = std::current_exception();
        }
      }
      t_in_task = false;
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) futex_wake(&done_, 1);
    }
  }

  void work() {
    uint32_t seen = 0;
    while (true) {
      for (int i = 0; i < kPoolSpin && gen_.load(std::memory_order_acquire) == seen; ++i)
        cpu_relax();
      if (gen_.load(std::memory_order_seq_cst) == seen) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        while (gen_.load(std::memory_order_seq_cst) == seen) futex_wait(&gen_, seen);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = gen_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      claim_tasks(seen);
    }
  }

  std::vector<std::thread> threads_;
  std::atomic<uint32_t> gen_{0};       // bumped per job; the workers' futex word
  std::atomic<uint32_t> sleepers_{0};  // workers asleep (or about to be) on gen_
  std::atomic<uint32_t> done_{0};      // tasks finished in this job; the caller's futex word
  std::atomic<uint64_t> claim_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> sleeps_{0};
  void (*fn_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
  std::mutex error_mu_;
  std::exception_ptr error_;
  int64_t error_idx_ = INT64_MAX;
};

thread_local std::unique_ptr<Pool> t_pool;

}  // namespace

namespace pool_detail {

void run_tasks(int threads, int64_t tasks, void (*fn)(void*, int64_t), void* ctx) {
  HEDDLE_ASSERT(tasks >= 0 && static_cast<uint64_t>(tasks) <= kMask) << tasks << " tasks";
  if (threads <= 1 || tasks <= 1 || t_in_task) {
    for (int64_t i = 0; i < tasks; ++i) fn(ctx, i);
    return;
  }
  if (!t_pool || t_pool->workers() != threads - 1) {
    t_pool.reset();
    t_pool = std::make_unique<Pool>(threads - 1);
  }
  t_pool->run(tasks, fn, ctx);
}

}  // namespace pool_detail

int64_t pool_worker_sleeps() { return t_pool ? t_pool->sleeps() : 0; }

}  // namespace heddle
