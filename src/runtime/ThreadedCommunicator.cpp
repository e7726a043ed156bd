#include "heddle/runtime/ThreadedCommunicator.h"

#include <algorithm>

#include "heddle/ops/Kernel.h"
#include "heddle/runtime/HostCores.h"

namespace heddle {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

WaitBarrier::WaitBarrier(int64_t n, int spin) : n_(static_cast<uint32_t>(n)), spin_(spin) {
  HEDDLE_ASSERT(n >= 1 && spin >= 0) << "barrier of " << n << " spinning " << spin;
}

void WaitBarrier::arrive_and_wait() {
  // The phase cannot move before this thread arrives, so this is the phase it waits out.
  const uint32_t phase = phase_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
    arrived_.store(0, std::memory_order_relaxed);  // seen by every thread that sees the new phase
    phase_.store(phase + 1, std::memory_order_release);
    phase_.notify_all();
    return;
  }
  for (int i = 0; i < spin_; ++i) {
    if (phase_.load(std::memory_order_acquire) != phase) return;
    cpu_relax();
  }
  if (phase_.load(std::memory_order_acquire) == phase)
    sleeps_.fetch_add(1, std::memory_order_relaxed);
  while (phase_.load(std::memory_order_acquire) == phase)
    phase_.wait(phase, std::memory_order_acquire);
}

class ThreadedWorld::Endpoint : public Communicator {
 public:
  Endpoint(ThreadedWorld& w, int64_t rank) : w_(w), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return w_.n_; }

  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override {
    const int64_t set = w_.one_barrier_ ? (calls_++ & 1) * w_.n_ : 0;
    const Tensor* const* slots = w_.slots_.data() + set;
    w_.slots_[set + rank_] = &mine;
    w_.barrier_.arrive_and_wait();
    Status st = failed();
    if (st.ok()) {
      bool reduce = c == Collective::kAllReduce || c == Collective::kReduceScatter;
      bool first = true;
      for (int64_t peer : group) {
        const Tensor& t = *slots[peer];
        if (!reduce) {
          out.copy_from(t);
        } else if (first) {
          out.copy_from(t);
        } else {
          kernels::combine(monoid, out, t);
        }
        first = false;
      }
    }
    if (w_.one_barrier_) return st;
    w_.barrier_.arrive_and_wait();
    return st.ok() ? failed() : st;
  }

 private:
  Status failed() const {
    int64_t f = w_.failed_.load();
    if (f < 0) return {};
    return Diagnostic("device " + std::to_string(f) + " failed; collective abandoned");
  }

  ThreadedWorld& w_;
  int64_t rank_;
  int64_t calls_ = 0;  // collectives so far (one-barrier mode: which slot set to use)
};

ThreadedWorld::ThreadedWorld(int64_t n, bool one_barrier, int64_t threads)
    : n_(n),
      one_barrier_(one_barrier),
      barrier_(n, host_cores() >= std::max(n, threads) ? WaitBarrier::kDefaultSpin : 0),
      slots_(static_cast<size_t>(2 * n)) {
  HEDDLE_ASSERT(n >= 1) << "world of " << n;
  for (int64_t i = 0; i < n; ++i) endpoints_.push_back(std::make_unique<Endpoint>(*this, i));
}

ThreadedWorld::~ThreadedWorld() = default;

Communicator& ThreadedWorld::endpoint(int64_t i) {
  HEDDLE_ASSERT(i >= 0 && i < n_) << "endpoint " << i;
  return *endpoints_[static_cast<size_t>(i)];
}

void ThreadedWorld::abort(int64_t device) {
  int64_t expected = -1;
  failed_.compare_exchange_strong(expected, device);
}

}  // namespace heddle
