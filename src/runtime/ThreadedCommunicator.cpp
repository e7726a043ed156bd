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

// Sums the members' tiles `from` (each all of out's `n` elements) into `out` in one pass, adding
// element by element in the members' order: the same values as copying the first and combining the
// others into it one after another, with each tile read once and `out` written once.
void sum_into(const std::vector<const float*>& from, float* out, int64_t n) {
  if (from.size() == 2) {
    const float* a = from[0];
    const float* b = from[1];
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    return;
  }
  constexpr int64_t kBlock = 1024;  // elements per pass, so the partial sums stay in cache
  for (int64_t lo = 0; lo < n; lo += kBlock) {
    const int64_t hi = std::min(n, lo + kBlock);
    std::copy(from[0] + lo, from[0] + hi, out + lo);
    for (size_t q = 1; q < from.size(); ++q)
      for (int64_t i = lo; i < hi; ++i) out[i] += from[q][i];
  }
}

class ThreadedWorld::Endpoint : public Communicator {
 public:
  Endpoint(ThreadedWorld& w, int64_t rank) : w_(w), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return w_.n_; }

  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override {
    // One batch per slot set: a set is rewritten only every other meeting (see below).
    for (auto& o : one_)  // both at once (one never used was never published), so steady
      if (o.capacity() == 0) o.reserve(1);  // steps allocate nothing
    std::vector<CollectiveCall>& one = one_[w_.one_barrier_ ? (calls_ & 1) : 0];
    one.assign(1, CollectiveCall{c, &group, &mine, &out, monoid});
    return collectives(one);
  }

  // The whole batch meets its peers once (twice without one_barrier): each member publishes its
  // batch, then builds its outputs from the peers' tiles. In one-barrier mode peers read the batch
  // until they reach their next meeting, so `calls` must live until then (DeviceExecutor's
  // batches live as long as the executor).
  Status collectives(const std::vector<CollectiveCall>& calls) override {
    const int64_t parity = w_.one_barrier_ ? (calls_++ & 1) : 0;
    const int64_t set = parity * w_.n_;
    const std::vector<CollectiveCall>* const* slots = w_.slots_.data() + set;
    w_.slots_[set + rank_] = &calls;
    w_.barrier_.arrive_and_wait();
    // Decided from the batch alone (never from a failure), so every member decides alike.
    const bool split = splits(calls, slots);
    Status st = failed();
    for (size_t i = 0; i < calls.size() && st.ok(); ++i) {
      const CollectiveCall& k = calls[i];
      bool reduce = k.c == Collective::kAllReduce || k.c == Collective::kReduceScatter;
      if (split && whole_sum(slots, i)) {
        sum_share(slots, i);
        continue;
      }
      if (reduce && fused(k, slots, i)) continue;
      bool first = true;
      for (int64_t peer : *k.group) {
        const Tensor& t = *(*slots[peer])[i].mine;
        if (!reduce || first)
          k.out->copy_from(t);
        else
          kernels::combine(k.monoid, *k.out, t);
        first = false;
      }
    }
    // A split batch meets again: each member's results are complete only when every member
    // has written its share.
    if (w_.one_barrier_ && !split) return st;
    w_.barrier_.arrive_and_wait();
    return st.ok() ? failed() : st;
  }

 private:
  // Whole-world batches whose float sums of whole tiles (whole_sum) hold at least this many
  // elements in all are split: below it, the extra meeting costs more than the halved sums save.
  static constexpr int64_t kSplitMin = int64_t{1} << 15;

  // Call i is a float sum whose members' tiles and results all share one region (the same
  // answer on every member: it reads only the published batches).
  bool whole_sum(const std::vector<CollectiveCall>* const* slots, size_t i) const {
    const CollectiveCall& k = (*slots[rank_])[i];
    if (k.c != Collective::kAllReduce || k.monoid != Monoid::kSum || k.out->is_int()) return false;
    for (int64_t peer : *k.group) {
      const CollectiveCall& p = (*slots[peer])[i];
      for (const Tensor* t : {p.mine, static_cast<const Tensor*>(p.out)})
        if (t->is_int() || t->origin() != k.out->origin() || t->shape() != k.out->shape())
          return false;
    }
    return true;
  }

  // Whether this batch's whole sums are split between the members: the group is the whole world
  // (so every device meets again after it) and the sums are large (kSplitMin).
  bool splits(const std::vector<CollectiveCall>& calls,
              const std::vector<CollectiveCall>* const* slots) const {
    if (w_.n_ < 2 || calls.empty() || static_cast<int64_t>(calls[0].group->size()) != w_.n_)
      return false;
    int64_t elements = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (*calls[i].group != *calls[0].group) return false;
      if (whole_sum(slots, i)) elements += calls[i].out->numel();
    }
    return elements >= kSplitMin;
  }

  // This member's share of call i's sum (group order, as sum_into), written into every member's
  // result: each element is summed once in the world instead of once per member.
  void sum_share(const std::vector<CollectiveCall>* const* slots, size_t i) {
    const std::vector<int64_t>& group = *(*slots[rank_])[i].group;
    const auto n = static_cast<int64_t>(group.size());
    const int64_t me = std::find(group.begin(), group.end(), rank_) - group.begin();
    const int64_t total = (*slots[rank_])[i].out->numel();
    constexpr int64_t kBlock = 4096;  // summed once, then copied while still in cache
    for (int64_t lo = total * me / n, end = total * (me + 1) / n; lo < end; lo += kBlock) {
      const int64_t len = std::min(kBlock, end - lo);
      from_.clear();
      for (int64_t peer : group) from_.push_back((*slots[peer])[i].mine->f32() + lo);
      float* mine = (*slots[rank_])[i].out->f32() + lo;
      sum_into(from_, mine, len);
      for (int64_t peer : group)
        if (peer != rank_) std::copy(mine, mine + len, (*slots[peer])[i].out->f32() + lo);
    }
  }

  Status failed() const {
    int64_t f = w_.failed_.load();
    if (f < 0) return {};
    return Diagnostic("device " + std::to_string(f) + " failed; collective abandoned");
  }

  // A float sum whose members' tiles all cover exactly out's region: sum_into.
  bool fused(const CollectiveCall& k, const std::vector<CollectiveCall>* const* slots, size_t i) {
    if (k.out->is_int() || k.monoid != Monoid::kSum) return false;
    from_.clear();
    for (int64_t peer : *k.group) {
      const Tensor& t = *(*slots[peer])[i].mine;
      if (t.is_int() || t.origin() != k.out->origin() || t.shape() != k.out->shape()) return false;
      from_.push_back(t.f32());
    }
    if (from_.empty()) return false;
    sum_into(from_, k.out->f32(), k.out->numel());
    return true;
  }

  ThreadedWorld& w_;
  int64_t rank_;
  int64_t calls_ = 0;                   // batches so far (one-barrier mode: which slot set to use)
  std::vector<CollectiveCall> one_[2];  // collective()'s batch of one, per slot set
  std::vector<const float*> from_;      // fused(): the members' tiles
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
