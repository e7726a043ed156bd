#include "heddle/pipeline/ListScheduler.h"

#include <queue>
#include <set>

#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {

namespace {

using Entry = std::pair<double, int>;  // (key, op)

/// The event-driven state of one list-scheduling run.
class ListRun {
 public:
  ListRun(const BlockPlacement& p, int m, const std::vector<double>& key, const ListOptions& o)
      : p_(p), m_(m), nb_(static_cast<int>(p.blocks.size())), key_(key), opt_(o) {}

  std::optional<Schedule> run() {
    const int n = m_ * nb_;
    HEDDLE_ASSERT(static_cast<int>(key_.size()) == n) << "one key per operation";
    succ_ = successors(p_);
    auto pred = predecessors(p_);
    waiting_.resize(n);
    for (int op = 0; op < n; ++op) waiting_[op] = static_cast<int>(pred[op % nb_].size());
    ready_.assign(p_.num_devices, {});
    busy_.assign(p_.num_devices, false);
    mem_.assign(p_.num_devices, 0.0);
    sched_ = Schedule{m_, nb_, std::vector<double>(n, -1.0)};
    if (opt_.protect_earlier) {
      need_.assign(m_, std::vector<double>(p_.num_devices, 0.0));
      left_.assign(m_, nb_);
      for (int i = 0; i < m_; ++i)
        for (const Block& b : p_.blocks)
          for (int d : b.devices) need_[i][d] += std::max(0.0, b.memory);
    }
    for (int op = 0; op < n; ++op)
      if (waiting_[op] == 0) release(op);
    int started = 0;
    double now = 0;
    while (true) {
      started += dispatch(now);
      if (events_.empty()) break;
      now = events_.top().first;
      while (!events_.empty() && events_.top().first == now) {
        int op = events_.top().second;
        events_.pop();
        finish(op);
      }
    }
    if (started != n) return std::nullopt;
    return sched_;
  }

 private:
  void release(int op) {
    const Block& b = p_.blocks[op % nb_];
    if (b.devices.size() > 1) {
      multi_.insert({key_[op], op});
    } else {
      ready_[b.devices[0]].insert({key_[op], op});
    }
  }

  void finish(int op) {
    const int micro = op / nb_;
    for (int d : p_.blocks[op % nb_].devices) busy_[d] = false;
    for (int c : succ_[op % nb_]) {
      int cop = micro * nb_ + c;
      if (--waiting_[cop] == 0) release(cop);
    }
  }

  bool fits(int op) const {
    const Block& b = p_.blocks[op % nb_];
    if (b.memory <= 0 || opt_.memory_limit.empty()) return true;
    const int micro = op / nb_;
    for (int d : b.devices) {
      double reserved = 0;
      if (opt_.protect_earlier) {
        for (int j : active_) {
          if (j >= micro) break;
          reserved += need_[j][d];
        }
      }
      if (mem_[d] + b.memory + reserved > opt_.memory_limit[d] + kTimeEpsilon) return false;
    }
    return true;
  }

  /// Books the start of `op` for protect_earlier.
  void account(int op) {
    if (!opt_.protect_earlier) return;
    const int micro = op / nb_;
    const Block& b = p_.blocks[op % nb_];
    for (int d : b.devices) need_[micro][d] -= std::max(0.0, b.memory);
    if (left_[micro] == nb_) active_.insert(micro);
    if (--left_[micro] == 0) active_.erase(micro);
  }

  /// Starts operations at `now` until no free device has a startable one; returns how many.
  /// Candidates are each free device's best-priority ready single-device operation that fits in
  /// memory, and the best ready multi-device operation that fits and finds all its devices free;
  /// the best candidate starts. With `reserve`, the best fitting multi-device operation that
  /// waits for a busy device holds its idle devices, so lower priorities cannot starve it.
  int dispatch(double now) {
    std::vector<bool> reserved(p_.num_devices, false);
    int started = 0;
    auto all_free = [&](const Block& b) {
      for (int x : b.devices)
        if (busy_[x] || reserved[x]) return false;
      return true;
    };
    while (true) {
      bool found = false;
      Entry best{0, -1};
      for (const Entry& e : multi_) {
        if (!fits(e.second)) continue;
        const Block& b = p_.blocks[e.second % nb_];
        if (all_free(b)) {
          best = e;
          found = true;
          break;
        }
        if (opt_.reserve) {
          for (int x : b.devices)
            if (!busy_[x]) reserved[x] = true;
          break;
        }
      }
      for (int d = 0; d < p_.num_devices; ++d) {
        if (busy_[d] || reserved[d]) continue;
        for (const Entry& e : ready_[d]) {
          if (!fits(e.second)) continue;
          if (!found || e < best) best = e;
          found = true;
          break;
        }
      }
      if (!found) break;
      const int op = best.second;
      const Block& b = p_.blocks[op % nb_];
      if (b.devices.size() > 1) {
        multi_.erase(best);
      } else {
        ready_[b.devices[0]].erase(best);
      }
      for (int d : b.devices) {
        busy_[d] = true;
        mem_[d] += b.memory;
      }
      account(op);
      sched_.start[op] = now;
      events_.push({now + b.span, op});
      ++started;
    }
    return started;
  }

  const BlockPlacement& p_;
  int m_;
  int nb_;
  const std::vector<double>& key_;
  const ListOptions& opt_;
  std::vector<std::vector<int>> succ_;
  std::vector<int> waiting_;
  std::vector<std::set<Entry>> ready_;  // ready single-device operations, per device
  std::set<Entry> multi_;               // ready multi-device operations
  std::vector<bool> busy_;
  std::vector<double> mem_;
  std::vector<std::vector<double>> need_;  // positive memory micro-batch i has yet to take on d
  std::vector<int> left_;                  // blocks of micro-batch i not started
  std::set<int> active_;                   // micro-batches started and not fully started
  Schedule sched_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> events_;
};

}  // namespace

std::optional<Schedule> list_schedule(const BlockPlacement& p, int m,
                                      const std::vector<double>& key, const ListOptions& options) {
  return ListRun(p, m, key, options).run();
}

}  // namespace heddle::pipeline
