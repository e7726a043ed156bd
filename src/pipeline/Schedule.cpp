#include "heddle/pipeline/Schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace heddle::pipeline {

std::string Schedule::to_string(const BlockPlacement& p) const {
  std::string s;
  for (int i = 0; i < micro_batches; ++i)
    for (int b = 0; b < blocks; ++b) s += fmt::format("{} {} {}\n", i, p.blocks[b].name, at(i, b));
  return s;
}

ScheduleStats compute_stats(const BlockPlacement& p, const Schedule& s) {
  HEDDLE_ASSERT(s.blocks == static_cast<int>(p.blocks.size())) << "schedule of another placement";
  ScheduleStats st;
  st.busy.assign(p.num_devices, 0.0);
  st.peak_memory.assign(p.num_devices, 0.0);
  std::vector<std::vector<std::pair<double, int>>> per_dev(p.num_devices);
  for (int op = 0; op < s.num_ops(); ++op) {
    const Block& b = p.blocks[op % s.blocks];
    st.makespan = std::max(st.makespan, s.start[op] + b.span);
    for (int d : b.devices) {
      st.busy[d] += b.span;
      per_dev[d].push_back({s.start[op], op});
    }
  }
  for (int d = 0; d < p.num_devices; ++d) {
    std::sort(per_dev[d].begin(), per_dev[d].end());
    double mem = 0;
    for (auto [t, op] : per_dev[d]) {
      mem += p.blocks[op % s.blocks].memory;
      st.peak_memory[d] = std::max(st.peak_memory[d], mem);
    }
  }
  double total = std::accumulate(st.busy.begin(), st.busy.end(), 0.0);
  if (st.makespan > 0) st.bubble_fraction = 1.0 - total / (p.num_devices * st.makespan);
  return st;
}

std::vector<int> peak_in_flight(const BlockPlacement& p, const Schedule& s) {
  BlockPlacement unit = p;
  for (Block& b : unit.blocks) b.memory = b.memory > 0 ? 1.0 : b.memory < 0 ? -1.0 : 0.0;
  const ScheduleStats st = compute_stats(unit, s);
  std::vector<int> out;
  for (double m : st.peak_memory) out.push_back(static_cast<int>(std::lround(m)));
  return out;
}

double makespan_lower_bound(const BlockPlacement& p, int m) {
  const int n = static_cast<int>(p.blocks.size());
  auto order = topological_order(p);
  auto pred = predecessors(p);
  auto succ = successors(p);
  std::vector<double> head(n, 0.0), tail(n, 0.0);  // longest path before / after a block
  for (int b : order)
    for (int a : pred[b]) head[b] = std::max(head[b], head[a] + p.blocks[a].span);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int c : succ[*it]) tail[*it] = std::max(tail[*it], tail[c] + p.blocks[c].span);
  double lb = 0;
  for (int b = 0; b < n; ++b) lb = std::max(lb, head[b] + p.blocks[b].span + tail[b]);
  auto load = device_loads(p);
  for (int d = 0; d < p.num_devices; ++d) {
    double h = std::numeric_limits<double>::infinity(), t = h;
    for (int b = 0; b < n; ++b) {
      const auto& devs = p.blocks[b].devices;
      if (std::find(devs.begin(), devs.end(), d) == devs.end()) continue;
      h = std::min(h, head[b]);
      t = std::min(t, tail[b]);
    }
    if (load[d] > 0) lb = std::max(lb, h + m * load[d] + t);
  }
  return lb;
}

Schedule schedule_from_sequence(const BlockPlacement& p, int m, const std::vector<int>& sequence) {
  const int nb = static_cast<int>(p.blocks.size());
  auto pred = predecessors(p);
  Schedule s{m, nb, std::vector<double>(static_cast<size_t>(m) * nb, -1.0)};
  HEDDLE_ASSERT(static_cast<int>(sequence.size()) == s.num_ops()) << "sequence of wrong length";
  std::vector<double> free_at(p.num_devices, 0.0);
  for (int op : sequence) {
    const int micro = op / nb, b = op % nb;
    const Block& blk = p.blocks[b];
    double t = 0;
    for (int a : pred[b]) {
      double sa = s.at(micro, a);
      HEDDLE_ASSERT(sa >= 0) << "sequence lists " << blk.name << " before its dependency";
      t = std::max(t, sa + p.blocks[a].span);
    }
    for (int d : blk.devices) t = std::max(t, free_at[d]);
    s.start[op] = t;
    for (int d : blk.devices) free_at[d] = t + blk.span;
  }
  return s;
}

Schedule left_justify(const BlockPlacement& p, const Schedule& s) {
  std::vector<int> seq(s.num_ops());
  std::iota(seq.begin(), seq.end(), 0);
  std::stable_sort(seq.begin(), seq.end(), [&](int a, int b) { return s.start[a] < s.start[b]; });
  return schedule_from_sequence(p, s.micro_batches, seq);
}

}  // namespace heddle::pipeline
