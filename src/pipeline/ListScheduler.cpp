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
  ListRun(const Placement& p, int m, const std::vector<double>& key, const ListOptions& o)
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
    for (int d : p_.blocks[op % nb_].devices) ready_[d].insert({key_[op], op});
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
    for (int d : b.devices)
      if (mem_[d] + b.memory > opt_.memory_limit[d] + kTimeEpsilon) return false;
    return true;
  }

  /// Starts operations at `now` until no free device has a startable one; returns how many.
  int dispatch(double now) {
    std::vector<bool> reserved(p_.num_devices, false);
    std::set<int> blocked;
    int started = 0;
    while (true) {
      bool found = false;
      Entry best{0, -1};
      for (int d = 0; d < p_.num_devices; ++d) {
        if (busy_[d] || reserved[d]) continue;
        for (const Entry& e : ready_[d]) {
          if (blocked.count(e.second) || !fits(e.second)) continue;
          if (!found || e < best) best = e;
          found = true;
          break;
        }
      }
      if (!found) break;
      const int op = best.second;
      const Block& b = p_.blocks[op % nb_];
      bool all_free = true;
      for (int d : b.devices) all_free = all_free && !busy_[d] && !reserved[d];
      if (!all_free) {
        blocked.insert(op);
        if (opt_.reserve)
          for (int d : b.devices)
            if (!busy_[d]) reserved[d] = true;
        continue;
      }
      for (int d : b.devices) {
        ready_[d].erase(best);
        busy_[d] = true;
        mem_[d] += b.memory;
      }
      sched_.start[op] = now;
      events_.push({now + b.span, op});
      ++started;
    }
    return started;
  }

  const Placement& p_;
  int m_;
  int nb_;
  const std::vector<double>& key_;
  const ListOptions& opt_;
  std::vector<std::vector<int>> succ_;
  std::vector<int> waiting_;
  std::vector<std::set<Entry>> ready_;
  std::vector<bool> busy_;
  std::vector<double> mem_;
  Schedule sched_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> events_;
};

}  // namespace

std::optional<Schedule> list_schedule(const Placement& p, int m, const std::vector<double>& key,
                                      const ListOptions& options) {
  return ListRun(p, m, key, options).run();
}

}  // namespace heddle::pipeline
