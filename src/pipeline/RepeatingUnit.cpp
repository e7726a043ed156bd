#include "heddle/pipeline/RepeatingUnit.h"

#include <algorithm>
#include <cmath>

#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {

namespace {

/// Iterative modulo scheduling (Rau's IMS): blocks are placed by priority at the earliest free
/// offset after their placed predecessors; a block that finds no slot within one period is
/// forced in and evicts whatever it clashes with (and successors it would now overlap).
class ModuloScheduler {
 public:
  ModuloScheduler(const BlockPlacement& p, double period, const std::vector<int>& order)
      : p_(p),
        period_(period),
        order_(order),
        pred_(predecessors(p)),
        succ_(successors(p)),
        on_device_(p.num_devices),
        offset_(p.blocks.size(), 0.0),
        placed_(p.blocks.size(), false),
        last_forced_(p.blocks.size(), -1.0) {
    for (size_t b = 0; b < p.blocks.size(); ++b)
      for (int d : p.blocks[b].devices) on_device_[d].push_back(static_cast<int>(b));
  }

  std::optional<RepeatingUnit> run() {
    int budget = 8 * static_cast<int>(order_.size()) + 16;
    while (budget-- > 0) {
      int b = next_unplaced();
      if (b < 0) return RepeatingUnit{period_, offset_};
      place(b);
    }
    return std::nullopt;
  }

 private:
  int next_unplaced() const {
    for (int b : order_)
      if (!placed_[b]) return b;
    return -1;
  }

  /// True when [s, s + len) and [t, t + l2) overlap modulo the period.
  bool clash(double s, double len, double t, double l2) const {
    double x = std::fmod(s - t, period_);
    if (x < 0) x += period_;
    // Intervals [0, l2) and [x, x + len) on a circle of length period.
    return x < l2 - kTimeEpsilon || x + len > period_ + kTimeEpsilon;
  }

  /// The first placed block on b's devices that clashes with b at offset s, or -1.
  int first_clash(int b, double s) const {
    for (int d : p_.blocks[b].devices)
      for (int c : on_device_[d])
        if (c != b && placed_[c] && clash(s, p_.blocks[b].span, offset_[c], p_.blocks[c].span))
          return c;
    return -1;
  }

  void place(int b) {
    const Block& blk = p_.blocks[b];
    double est = 0;
    for (int a : pred_[b])
      if (placed_[a]) est = std::max(est, offset_[a] + p_.blocks[a].span);
    double s = est;
    bool found = false;
    while (s <= est + period_ - blk.span + kTimeEpsilon) {
      int c = first_clash(b, s);
      if (c < 0) {
        found = true;
        break;
      }
      // Jump to the end of the clashing block, in the copy that overlaps s.
      double rel = std::fmod(s - offset_[c], period_);
      if (rel < 0) rel += period_;
      double jump =
          rel < p_.blocks[c].span ? p_.blocks[c].span - rel : period_ - rel + p_.blocks[c].span;
      s += std::max(jump, kTimeEpsilon);
    }
    if (!found) {
      // Force: at est, or just after the previous forced offset so the search moves on.
      s = last_forced_[b] >= est ? last_forced_[b] + 1e-3 * period_ + kTimeEpsilon : est;
      if (has_integer_spans(p_) && period_ == std::floor(period_)) s = std::ceil(s);
      last_forced_[b] = s;
      for (int c; (c = first_clash(b, s)) >= 0;) placed_[c] = false;
    }
    offset_[b] = s;
    placed_[b] = true;
    for (int c : succ_[b])
      if (placed_[c] && offset_[c] < s + blk.span - kTimeEpsilon) placed_[c] = false;
  }

  const BlockPlacement& p_;
  double period_;
  const std::vector<int>& order_;
  std::vector<std::vector<int>> pred_, succ_, on_device_;
  std::vector<double> offset_;
  std::vector<bool> placed_;
  std::vector<double> last_forced_;
};

/// True when [s, s + len) and [t, t + l2) overlap modulo `period`.
bool clashes(double period, double s, double len, double t, double l2) {
  double x = std::fmod(s - t, period);
  if (x < 0) x += period;
  return x < l2 - kTimeEpsilon || x + len > period + kTimeEpsilon;
}

/// Reserves the residues of multi-device blocks first, then places the others in `order`, each
/// at the earliest free offset that still leaves room on its device for the device's blocks not
/// yet placed (first-fit into the free gaps). A multi-device block later takes the first offset
/// with its residue after its dependencies.
class ReserveFirst {
 public:
  ReserveFirst(const BlockPlacement& p, double period, const std::vector<int>& order)
      : p_(p), period_(period), order_(order), busy_(p.num_devices) {}

  std::optional<RepeatingUnit> run(bool at_head) {
    const int nb = static_cast<int>(p_.blocks.size());
    auto pred = predecessors(p_);
    std::vector<double> head(nb, 0.0);
    for (int b : order_)
      for (int a : pred[b]) head[b] = std::max(head[b], head[a] + p_.blocks[a].span);
    std::vector<double> residue(nb, -1.0);
    pending_.assign(p_.num_devices, {});
    for (int b : order_) {
      if (p_.blocks[b].devices.size() > 1) {
        auto s = first_free(b, at_head ? std::fmod(head[b], period_) : 0.0, false);
        if (!s) return std::nullopt;
        residue[b] = std::fmod(*s, period_);
        reserve(b, *s);
      } else {
        pending_[p_.blocks[b].devices[0]].push_back(b);
      }
    }
    RepeatingUnit unit{period_, std::vector<double>(nb, 0.0)};
    for (int b : order_) {
      double est = 0;
      for (int a : pred[b]) est = std::max(est, unit.offset[a] + p_.blocks[a].span);
      if (residue[b] >= 0) {
        double k = std::ceil((est - residue[b]) / period_ - 1e-9);
        unit.offset[b] = residue[b] + std::max(0.0, k) * period_;
        continue;
      }
      auto& pend = pending_[p_.blocks[b].devices[0]];
      pend.erase(std::find(pend.begin(), pend.end(), b));
      auto s = first_free(b, est, true);
      if (!s) s = first_free(b, est, false);
      if (!s) return std::nullopt;
      unit.offset[b] = *s;
      reserve(b, *s);
    }
    return unit;
  }

 private:
  void reserve(int b, double s) {
    for (int d : p_.blocks[b].devices)
      busy_[d].push_back({std::fmod(s, period_), p_.blocks[b].span});
  }

  bool is_free(int b, double s) const {
    for (int d : p_.blocks[b].devices)
      for (auto [r, l] : busy_[d])
        if (clashes(period_, s, p_.blocks[b].span, r, l)) return false;
    return true;
  }

  /// True when device d, with [s, s + span(b)) also taken, has gaps for its pending blocks.
  bool leaves_room(int b, double s) const {
    int d = p_.blocks[b].devices[0];
    auto busy = busy_[d];
    busy.push_back({std::fmod(s, period_), p_.blocks[b].span});
    std::sort(busy.begin(), busy.end());
    std::vector<double> gaps;
    for (size_t i = 0; i < busy.size(); ++i) {
      double end = busy[i].first + busy[i].second;
      double next = i + 1 < busy.size() ? busy[i + 1].first : busy[0].first + period_;
      if (next - end > kTimeEpsilon) gaps.push_back(next - end);
    }
    std::vector<double> need;
    for (int c : pending_[d]) need.push_back(p_.blocks[c].span);
    std::sort(need.rbegin(), need.rend());
    for (double n : need) {
      auto it =
          std::find_if(gaps.begin(), gaps.end(), [&](double g) { return g >= n - kTimeEpsilon; });
      if (it == gaps.end()) return false;
      *it -= n;
    }
    return true;
  }

  /// The earliest offset in [from, from + period) where b fits (and, with lookahead, leaves room).
  std::optional<double> first_free(int b, double from, bool lookahead) const {
    std::vector<double> cand = {from};
    for (int d : p_.blocks[b].devices) {
      for (auto [r, l] : busy_[d]) {
        double e = r + l;
        double k = std::ceil((from - e) / period_ - 1e-9);
        cand.push_back(e + k * period_);
      }
    }
    std::sort(cand.begin(), cand.end());
    for (double s : cand) {
      if (s > from + period_ - kTimeEpsilon) break;
      if (is_free(b, s) && (!lookahead || leaves_room(b, s))) return s;
    }
    return std::nullopt;
  }

  const BlockPlacement& p_;
  double period_;
  const std::vector<int>& order_;
  std::vector<std::vector<std::pair<double, double>>> busy_;  // (residue, span) per device
  std::vector<std::vector<int>> pending_;  // single-device blocks not yet placed, per device
};

}  // namespace

std::optional<RepeatingUnit> modulo_schedule(const BlockPlacement& p, double period,
                                             const std::vector<int>& order, MultiDevice multi) {
  for (const Block& b : p.blocks) {
    HEDDLE_ASSERT(b.span <= period + kTimeEpsilon) << "period shorter than a span";
  }
  if (multi == MultiDevice::kInOrder) return ModuloScheduler(p, period, order).run();
  return ReserveFirst(p, period, order).run(multi == MultiDevice::kReserveAtHead);
}

Schedule unroll(const RepeatingUnit& unit, int m) {
  const int nb = static_cast<int>(unit.offset.size());
  Schedule s{m, nb, std::vector<double>(static_cast<size_t>(m) * nb)};
  for (int i = 0; i < m; ++i)
    for (int b = 0; b < nb; ++b) s.start[i * nb + b] = i * unit.period + unit.offset[b];
  return s;
}

}  // namespace heddle::pipeline
