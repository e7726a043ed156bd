// Brute force for tiny instances: the minimum makespan over every per-device order of the
// operations, by depth-first search over operation sequences with branch-and-bound pruning.
// Every optimal schedule, moved left with its per-device orders kept (same memory), is one of
// the schedules this enumerates, so the minimum is the true optimum.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "heddle/pipeline/Placement.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::pipeline::testing {

/// Minimum makespan of `m` micro-batches of `p` with running memory <= `limit` on every device;
/// infinity when none exists. Precondition: tiny (a dozen operations or so).
inline double brute_force_makespan(const BlockPlacement& p, int m, double limit) {
  const int nb = static_cast<int>(p.blocks.size());
  const int n = m * nb;
  auto pred = predecessors(p);
  std::vector<double> end(n, -1.0), free_at(p.num_devices, 0.0), mem(p.num_devices, 0.0);
  std::vector<double> left = device_loads(p);
  for (double& l : left) l *= m;
  double best = std::numeric_limits<double>::infinity();
  auto dfs = [&](auto&& self, int done, double makespan) -> void {
    if (makespan >= best) return;
    for (int d = 0; d < p.num_devices; ++d)
      if (free_at[d] + left[d] >= best) return;
    if (done == n) {
      best = makespan;
      return;
    }
    for (int op = 0; op < n; ++op) {
      if (end[op] >= 0) continue;
      const int micro = op / nb, b = op % nb;
      const Block& blk = p.blocks[b];
      double t = 0;
      bool ready = true;
      for (int a : pred[b]) {
        if (end[micro * nb + a] < 0) ready = false;
        t = std::max(t, end[micro * nb + a]);
      }
      if (!ready) continue;
      bool fits = true;
      for (int d : blk.devices) {
        t = std::max(t, free_at[d]);
        fits = fits && (blk.memory <= 0 || mem[d] + blk.memory <= limit + kTimeEpsilon);
      }
      if (!fits) continue;
      std::vector<double> saved;
      for (int d : blk.devices) {
        saved.push_back(free_at[d]);
        free_at[d] = t + blk.span;
        mem[d] += blk.memory;
        left[d] -= blk.span;
      }
      end[op] = t + blk.span;
      self(self, done + 1, std::max(makespan, t + blk.span));
      end[op] = -1;
      for (size_t k = 0; k < blk.devices.size(); ++k) {
        int d = blk.devices[k];
        free_at[d] = saved[k];
        mem[d] -= blk.memory;
        left[d] += blk.span;
      }
    }
  };
  dfs(dfs, 0, 0.0);
  return best;
}

}  // namespace heddle::pipeline::testing
