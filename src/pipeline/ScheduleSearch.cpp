#include "heddle/pipeline/ScheduleSearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/ListScheduler.h"
#include "heddle/pipeline/RepeatingUnit.h"
#include "heddle/pipeline/Validate.h"
#include "heddle/support/Cancel.h"
#include "heddle/support/Limits.h"

namespace heddle::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

/// Longest path before (head) and after (tail) each block within one micro-batch.
void paths(const BlockPlacement& p, std::vector<double>& head, std::vector<double>& tail) {
  const int n = static_cast<int>(p.blocks.size());
  auto order = topological_order(p);
  auto pred = predecessors(p);
  auto succ = successors(p);
  head.assign(n, 0.0);
  tail.assign(n, 0.0);
  for (int b : order)
    for (int a : pred[b]) head[b] = std::max(head[b], head[a] + p.blocks[a].span);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int c : succ[*it]) tail[*it] = std::max(tail[*it], tail[c] + p.blocks[c].span);
}

/// Topological orders in which the repeating unit is packed: earliest-start first, and
/// longest-remaining-path first.
std::vector<std::vector<int>> unit_orders(const BlockPlacement& p) {
  std::vector<double> head, tail;
  paths(p, head, tail);
  std::vector<int> a(p.blocks.size());
  std::iota(a.begin(), a.end(), 0);
  std::vector<int> b = a;
  std::stable_sort(a.begin(), a.end(), [&](int x, int y) { return head[x] < head[y]; });
  std::stable_sort(b.begin(), b.end(), [&](int x, int y) { return tail[x] > tail[y]; });
  std::vector<std::vector<int>> out = {a};
  if (b != a) out.push_back(b);
  return out;
}

/// The periods to try: the lower bound, then small steps, then geometric ones up to `hi`.
std::vector<double> candidate_periods(const BlockPlacement& p, double lo, double hi) {
  const bool integer = has_integer_spans(p);
  double longest = 0;
  for (const Block& b : p.blocks) longest = std::max(longest, b.span);
  lo = std::max(lo, longest);
  if (integer) lo = std::ceil(lo);
  std::vector<double> out;
  double step = integer ? 1.0 : lo / 32;
  double t = lo;
  for (int k = 0; t <= hi + kTimeEpsilon; ++k) {
    out.push_back(t);
    if (k >= 8) step *= 1.25;
    t = integer ? std::ceil(t + step) : t + step;
  }
  if (out.empty() || out.back() < hi) out.push_back(integer ? std::ceil(hi) : hi);
  return out;
}

/// Collects valid candidates and keeps the best.
class Best {
 public:
  Best(const BlockPlacement& p, double limit) : p_(p), limit_(limit) {}

  /// Offers a schedule; `slope` computes its period when it is not known (NaN).
  void offer(std::string method, const Schedule& raw, double period,
             std::function<double()> slope = nullptr) {
    Schedule s = left_justify(p_, raw);
    if (!validate_schedule(p_, s, limit_).ok()) return;
    ++count_;
    double ms = compute_stats(p_, s).makespan;
    if (has_ && ms >= makespan_ - kTimeEpsilon) return;
    has_ = true;
    makespan_ = ms;
    result_.schedule = std::move(s);
    result_.method = std::move(method);
    result_.period = period;
    slope_ = std::move(slope);
  }

  bool has() const { return has_; }
  int count() const { return count_; }
  ScheduleSearchResult take() {
    if (slope_) result_.period = slope_();
    result_.makespan = makespan_;
    result_.candidates = count_;
    return std::move(result_);
  }

 private:
  const BlockPlacement& p_;
  double limit_;
  bool has_ = false;
  int count_ = 0;
  double makespan_ = 0;
  ScheduleSearchResult result_;
  std::function<double()> slope_;
};

/// Keys i * period + offset[b] for `m` micro-batches.
std::vector<double> unit_keys(const std::vector<double>& offset, double period, int m) {
  const int nb = static_cast<int>(offset.size());
  std::vector<double> key(static_cast<size_t>(m) * nb);
  for (int i = 0; i < m; ++i)
    for (int b = 0; b < nb; ++b) key[i * nb + b] = i * period + offset[b];
  return key;
}

/// Average time per extra micro-batch of a list schedule keyed by `offset`/`period`, measured
/// in steady state: between max(m, 4p) and that + max(8, 2p) micro-batches.
double list_slope(const BlockPlacement& p, int m, const std::vector<double>& offset, double period,
                  const ListOptions& opt) {
  const int m1 = std::max(m, 4 * p.num_devices), k = std::max(8, 2 * p.num_devices);
  auto makespan = [&](int count) -> std::optional<double> {
    auto s = list_schedule(p, count, unit_keys(offset, period, count), opt);
    if (!s) return std::nullopt;
    return compute_stats(p, left_justify(p, *s)).makespan;
  };
  auto a = makespan(m1), b = makespan(m1 + k);
  if (!a || !b) return period;
  return (*b - *a) / k;
}

/// Depth-first branch and bound over operation sequences (each operation as early as its
/// dependencies and the previous operation on its devices allow), pruned by `best` and by each
/// device's remaining load; stops after `budget` nodes. Every left-justified schedule is such a
/// sequence, so an exhausted search proves optimality. Returns a better schedule, if found.
std::optional<Schedule> branch_and_bound(const BlockPlacement& p, int m, double limit, double best,
                                         long budget) {
  const int nb = static_cast<int>(p.blocks.size());
  const int n = m * nb;
  auto pred = predecessors(p);
  std::vector<double> start(n, -1.0), free_at(p.num_devices, 0.0), mem(p.num_devices, 0.0);
  std::vector<double> left = device_loads(p);
  for (double& l : left) l *= m;
  std::optional<Schedule> found;
  auto dfs = [&](auto&& self, int done, double makespan) -> void {
    if (budget-- <= 0 || makespan >= best - kTimeEpsilon) return;
    for (int d = 0; d < p.num_devices; ++d)
      if (free_at[d] + left[d] >= best - kTimeEpsilon) return;
    if (done == n) {
      best = makespan;
      found = Schedule{m, nb, start};
      return;
    }
    for (int op = 0; op < n; ++op) {
      if (start[op] >= 0) continue;
      const int micro = op / nb, b = op % nb;
      const Block& blk = p.blocks[b];
      double t = 0;
      bool ok = true;
      for (int a : pred[b]) {
        double sa = start[micro * nb + a];
        ok = ok && sa >= 0;
        t = std::max(t, sa + p.blocks[a].span);
      }
      for (int d : blk.devices) {
        t = std::max(t, free_at[d]);
        ok = ok && (blk.memory <= 0 || mem[d] + blk.memory <= limit + kTimeEpsilon);
      }
      if (!ok) continue;
      std::vector<double> saved;
      for (int d : blk.devices) {
        saved.push_back(free_at[d]);
        free_at[d] = t + blk.span;
        mem[d] += blk.memory;
        left[d] -= blk.span;
      }
      start[op] = t;
      self(self, done + 1, std::max(makespan, t + blk.span));
      start[op] = -1;
      for (size_t k = 0; k < blk.devices.size(); ++k) {
        free_at[blk.devices[k]] = saved[k];
        mem[blk.devices[k]] -= blk.memory;
        left[blk.devices[k]] += blk.span;
      }
    }
  };
  dfs(dfs, 0, 0.0);
  return found;
}

}  // namespace

double minimum_memory(const BlockPlacement& p, int m) {
  auto st = compute_stats(p, sequential_schedule(p, m).schedule);
  return *std::max_element(st.peak_memory.begin(), st.peak_memory.end());
}

Status check_request(const BlockPlacement& p, int m, double memory_limit) {
  HEDDLE_TRY(check_placement(p));
  if (m < 1) {
    return Diagnostic(fmt::format("the micro-batch count must be at least 1, got {}", m));
  }
  // Bounds before anything is allocated: the schedulers hold every block of every micro-batch.
  if (p.num_devices > limits::kMaxScheduleDevices)
    return Diagnostic(fmt::format("{} devices is more than the {} a schedule search handles",
                                  p.num_devices, limits::kMaxScheduleDevices));
  if (m > limits::kMaxMicroBatches)
    return Diagnostic(fmt::format("{} micro-batches is more than the {} a schedule search handles",
                                  m, limits::kMaxMicroBatches));
  if (static_cast<int64_t>(p.blocks.size()) * m > limits::kMaxScheduleBlocks)
    return Diagnostic(fmt::format(
        "{} blocks per micro-batch times {} micro-batches is {} blocks, more than the {} a "
        "schedule search holds in memory; use fewer micro-batches",
        p.blocks.size(), m, static_cast<int64_t>(p.blocks.size()) * m, limits::kMaxScheduleBlocks));
  auto st = compute_stats(p, sequential_schedule(p, m).schedule);
  for (int d = 0; d < p.num_devices; ++d) {
    if (st.peak_memory[d] > memory_limit + kTimeEpsilon) {
      return Diagnostic(
          fmt::format("memory limit {} is below {}, the memory device {} needs even "
                      "when micro-batches run one at a time; use --memory {} or more",
                      memory_limit, st.peak_memory[d], d, st.peak_memory[d]));
    }
  }
  return {};
}

Result<ScheduleSearchResult> search_schedule(const BlockPlacement& p, int m, double memory_limit,
                                             const ScheduleSearchOptions& options) {
  const auto t0 = Clock::now();
  HEDDLE_TRY(check_request(p, m, memory_limit));
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Best best(p, memory_limit);
  auto load = device_loads(p);
  const double period_lb = *std::max_element(load.begin(), load.end());
  // List-scheduling variants: plain, reserving devices for multi-device blocks, and protecting
  // earlier micro-batches' memory.
  std::vector<ListOptions> variants(3);
  for (auto& v : variants) v.memory_limit.assign(p.num_devices, memory_limit);
  variants[1].reserve = true;
  variants[2].protect_earlier = true;

  // Repeating units for increasing periods; each is used directly and as list-schedule keys.
  std::vector<std::pair<std::vector<int>, MultiDevice>> orders;
  for (const auto& order : unit_orders(p)) orders.push_back({order, MultiDevice::kInOrder});
  if (std::any_of(p.blocks.begin(), p.blocks.end(),
                  [](const Block& b) { return b.devices.size() > 1; })) {
    for (const auto& order : unit_orders(p)) {
      orders.push_back({order, MultiDevice::kReserveAtHead});
      orders.push_back({order, MultiDevice::kReservePacked});
    }
  }
  double total_span = 0;
  for (const Block& b : p.blocks) total_span += b.span;
  auto periods = candidate_periods(
      p, period_lb,
      std::max(period_lb, std::min(total_span, options.max_period_factor * period_lb)));
  int extra = -1;
  for (double period : periods) {
    if (extra >= options.extra_periods || elapsed() > options.time_limit_s || cancel_requested())
      break;
    if (extra >= 0) ++extra;
    // Every unit is tried directly; the list schedules start from the unit with the shortest
    // latency (one micro-batch's span), which keeps the least memory in flight.
    std::optional<RepeatingUnit> shortest;
    double shortest_latency = 0;
    for (const auto& [order, multi] : orders) {
      auto unit = modulo_schedule(p, period, order, multi);
      if (!unit) continue;
      Schedule direct = unroll(*unit, m);
      if (extra < 0 && validate_schedule(p, direct, memory_limit).ok()) extra = 0;
      best.offer("unit", direct, period);
      double latency = compute_stats(p, unroll(*unit, 1)).makespan;
      if (!shortest || latency < shortest_latency) {
        shortest = unit;
        shortest_latency = latency;
      }
    }
    if (!shortest) continue;
    for (const ListOptions& o : variants) {
      auto s = list_schedule(p, m, unit_keys(shortest->offset, period, m), o);
      if (!s) continue;
      auto offset = shortest->offset;
      best.offer("unit+list", *s, period,
                 [&p, m, offset, period, o] { return list_slope(p, m, offset, period, o); });
    }
  }
  // Plain list scheduling by earliest start, micro-batches spaced by the period bound.
  {
    std::vector<double> head, tail;
    paths(p, head, tail);
    for (const ListOptions& o : variants) {
      auto s = list_schedule(p, m, unit_keys(head, period_lb, m), o);
      if (!s) continue;
      best.offer("list", *s, period_lb,
                 [&p, m, head, period_lb, o] { return list_slope(p, m, head, period_lb, o); });
    }
  }
  if (options.include_baselines) {
    for (const auto& name : applicable_baselines(p, m)) {
      auto b = build_baseline(name, p, m);
      HEDDLE_ASSERT(b.ok()) << b.error().to_string();
      best.offer(name, b->schedule, b->period);
    }
  } else {
    auto seq = sequential_schedule(p, m);
    best.offer("sequential", seq.schedule, seq.period);
  }
  HEDDLE_ASSERT(best.has()) << "no valid schedule although the memory check passed";
  ScheduleSearchResult r = best.take();
  // Tiny instances: try to close the gap to the optimum with a bounded branch and bound.
  if (m * static_cast<int>(p.blocks.size()) <= options.exact_max_ops) {
    const double lb = makespan_lower_bound(p, m);
    if (r.makespan > lb + kTimeEpsilon) {
      auto better = branch_and_bound(p, m, memory_limit, r.makespan, options.exact_node_budget);
      if (better) {
        r.schedule = *better;
        r.makespan = compute_stats(p, *better).makespan;
        r.method = "branch-and-bound";
      }
    }
  }
  r.period_lower_bound = period_lb;
  r.lower_bound = makespan_lower_bound(p, m);
  r.search_time_s = elapsed();
  return r;
}

}  // namespace heddle::pipeline
