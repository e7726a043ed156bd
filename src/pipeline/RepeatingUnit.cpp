#include "heddle/pipeline/RepeatingUnit.h"

#include <cmath>

#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline {

namespace {

/// Occupied intervals of each device, as (offset modulo period, length).
class ReservationTable {
 public:
  ReservationTable(int devices, double period) : busy_(devices), period_(period) {}

  /// When [s, s + len) clashes on device d, the time to move s to; else s itself.
  double first_clash_end(int d, double s, double len) const {
    double x = std::fmod(s, period_);
    for (auto [o, l] : busy_[d]) {
      for (int k = -1; k <= 1; ++k) {
        double a = o + k * period_, e = a + l;
        if (x < e - kTimeEpsilon && a < x + len - kTimeEpsilon) return s + (e - x);
      }
    }
    return s;
  }

  void reserve(int d, double s, double len) { busy_[d].push_back({std::fmod(s, period_), len}); }

 private:
  std::vector<std::vector<std::pair<double, double>>> busy_;
  double period_;
};

}  // namespace

std::optional<RepeatingUnit> modulo_schedule(const Placement& p, double period,
                                             const std::vector<int>& order) {
  const int nb = static_cast<int>(p.blocks.size());
  auto pred = predecessors(p);
  ReservationTable table(p.num_devices, period);
  RepeatingUnit unit{period, std::vector<double>(nb, 0.0)};
  for (int b : order) {
    const Block& blk = p.blocks[b];
    HEDDLE_ASSERT(blk.span <= period + kTimeEpsilon) << "period shorter than a span";
    double est = 0;
    for (int a : pred[b]) est = std::max(est, unit.offset[a] + p.blocks[a].span);
    double s = est;
    bool moved = true;
    while (moved) {
      moved = false;
      for (int d : blk.devices) {
        double t = table.first_clash_end(d, s, blk.span);
        if (t != s) {
          s = t;
          moved = true;
        }
      }
      if (s > est + period + kTimeEpsilon) return std::nullopt;
    }
    unit.offset[b] = s;
    for (int d : blk.devices) table.reserve(d, s, blk.span);
  }
  return unit;
}

Schedule unroll(const RepeatingUnit& unit, int m) {
  const int nb = static_cast<int>(unit.offset.size());
  Schedule s{m, nb, std::vector<double>(static_cast<size_t>(m) * nb)};
  for (int i = 0; i < m; ++i)
    for (int b = 0; b < nb; ++b) s.start[i * nb + b] = i * unit.period + unit.offset[b];
  return s;
}

}  // namespace heddle::pipeline
