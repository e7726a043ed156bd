#include "heddle/pipeline/Baselines.h"

#include <fmt/format.h>

#include <algorithm>

#include "heddle/pipeline/ListScheduler.h"
#include "heddle/support/Strings.h"

namespace heddle::pipeline {

namespace {

double max_load(const BlockPlacement& p) {
  auto load = device_loads(p);
  return *std::max_element(load.begin(), load.end());
}

/// Phase 0 for forward blocks none of whose ancestors is a non-forward block, else phase 1.
std::vector<int> phases(const BlockPlacement& p) {
  std::vector<int> phase(p.blocks.size(), 0);
  auto pred = predecessors(p);
  for (int b : topological_order(p)) {
    phase[b] = p.blocks[b].type == "forward" ? 0 : 1;
    for (int a : pred[b]) phase[b] = std::max(phase[b], phase[a]);
  }
  return phase;
}

BaselineSchedule gpipe(const BlockPlacement& p, int m) {
  const int nb = static_cast<int>(p.blocks.size());
  auto phase = phases(p);
  auto topo = topological_order(p);
  std::vector<int> seq;
  for (int ph = 0; ph < 2; ++ph)
    for (int i = 0; i < m; ++i)
      for (int b : topo)
        if (phase[b] == ph) seq.push_back(i * nb + b);
  return {"gpipe", schedule_from_sequence(p, m, seq), max_load(p)};
}

/// Megatron's (interleaved) 1F1B order for device d: `warmup` forwards, then one forward and one
/// backward alternately, then the remaining backwards. fwd(k)/bwd(k) give the k-th operation.
template <class F, class B>
std::vector<int> one_f_one_b(int total, int warmup, F fwd, B bwd) {
  warmup = std::min(warmup, total);
  std::vector<int> order;
  for (int k = 0; k < warmup; ++k) order.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(fwd(warmup + k));
    order.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd(k));
  return order;
}

BaselineSchedule one_f_one_b_vshape(const BlockPlacement& p, int m) {
  const int P = p.num_devices, nb = 2 * P;
  std::vector<std::vector<int>> orders(P);
  for (int d = 0; d < P; ++d) {
    orders[d] = one_f_one_b(
        m, P - 1 - d, [&](int k) { return k * nb + d; },
        [&](int k) { return k * nb + P + (P - 1 - d); });
  }
  return {"1f1b", schedule_from_device_orders(p, m, orders), max_load(p)};
}

BaselineSchedule interleaved(const BlockPlacement& p, int m) {
  const int P = p.num_devices, V = p.chunks, nb = 2 * P * V;
  const int total = m * V;
  std::vector<std::vector<int>> orders(P);
  for (int d = 0; d < P; ++d) {
    auto micro = [&](int k) { return (k / (P * V)) * P + k % P; };
    auto chunk = [&](int k) { return (k % (P * V)) / P; };
    int warmup = m == P ? total : (P - d - 1) * 2 + (V - 1) * P;
    orders[d] = one_f_one_b(
        total, warmup, [&](int k) { return micro(k) * nb + chunk(k) * P + d; },
        [&](int k) {
          int c = V - 1 - chunk(k);  // backward visits chunks in reverse
          return micro(k) * nb + P * V + (V - 1 - c) * P + (P - 1 - d);
        });
  }
  return {"interleaved", schedule_from_device_orders(p, m, orders), max_load(p)};
}

/// Greedy list schedule preferring types in `rank` order (then lower micro-batches), with the
/// memory cap `cap(d)` on device d.
template <class Rank, class Cap>
Schedule greedy(const BlockPlacement& p, int m, Rank rank, Cap cap) {
  const int nb = static_cast<int>(p.blocks.size());
  std::vector<double> key(static_cast<size_t>(m) * nb);
  for (int i = 0; i < m; ++i)
    for (int b = 0; b < nb; ++b) key[i * nb + b] = rank(p.blocks[b]) * (m + 1.0) + i;
  ListOptions opt;
  for (int d = 0; d < p.num_devices; ++d) opt.memory_limit.push_back(cap(d));
  auto s = list_schedule(p, m, key, opt);
  HEDDLE_ASSERT(s.has_value()) << "baseline list schedule deadlocked";
  return *s;
}

int zb_rank(const Block& b) {
  if (b.type == "backward") return 0;
  return b.type == "forward" ? 1 : 2;
}

/// ZB-H1 (arXiv 2401.10241, figure 3 top): 1F1B's order of F and B; device d runs the W of
/// micro-batch j right after the B of micro-batch j + d, so every device holds p micro-batches
/// (1F1B's peak, reached by device 0 only) and the delayed W fill the cool-down bubbles.
BaselineSchedule zb_h1(const BlockPlacement& p, int m) {
  const int P = p.num_devices, nb = 3 * P;
  std::vector<std::vector<int>> orders(P);
  for (int d = 0; d < P; ++d) {
    auto f = [&](int k) { return k * nb + d; };
    auto b = [&](int k) { return k * nb + P + (P - 1 - d); };
    auto w = [&](int k) { return k * nb + 2 * P + (P - 1 - d); };
    std::vector<int> fb = one_f_one_b(m, P - 1 - d, f, b);
    int backwards = 0, weights = 0;
    for (int op : fb) {
      orders[d].push_back(op);
      if (op % nb == P + (P - 1 - d) && ++backwards > d) orders[d].push_back(w(weights++));
    }
    while (weights < m) orders[d].push_back(w(weights++));
  }
  return {"zb-h1", schedule_from_device_orders(p, m, orders), max_load(p)};
}

}  // namespace

std::vector<std::string> baseline_names() {
  return {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "chimera", "sequential"};
}

std::vector<std::string> applicable_baselines(const BlockPlacement& p, int m) {
  std::vector<std::string> out = {"gpipe"};
  if (p.family == "vshape") out.push_back("1f1b");
  if (p.family == "interleaved" && m % p.num_devices == 0) out.push_back("interleaved");
  if (p.family == "vshape-zb") {
    out.push_back("zb-h1");
    out.push_back("zb-h2");
  }
  if (p.family == "xshape") out.push_back("chimera");
  out.push_back("sequential");
  return out;
}

Result<BaselineSchedule> build_baseline(std::string_view name, const BlockPlacement& p, int m) {
  auto names = baseline_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return Diagnostic(fmt::format("unknown baseline '{}': use one of {}", name, join(names, ", ")));
  }
  auto ok = applicable_baselines(p, m);
  if (std::find(ok.begin(), ok.end(), name) == ok.end()) {
    std::string why = name == "interleaved" && p.family == "interleaved"
                          ? fmt::format(
                                " (it needs the micro-batch count {} to be a multiple of "
                                "the device count {})",
                                m, p.num_devices)
                          : "";
    return Diagnostic(
        fmt::format("baseline '{}' does not apply to placement '{}'{}; baselines "
                    "that apply: {}",
                    name, p.name, why, join(ok, ", ")));
  }
  const int P = p.num_devices;
  if (name == "gpipe") return gpipe(p, m);
  if (name == "1f1b") return one_f_one_b_vshape(p, m);
  if (name == "interleaved") return interleaved(p, m);
  if (name == "zb-h1") {
    return zb_h1(p, m);
  }
  if (name == "zb-h2") {
    // 2p - 1 micro-batches in flight on every device: extra warm-up forwards fill the bubble.
    return BaselineSchedule{"zb-h2", greedy(p, m, zb_rank, [&](int) { return 2 * P - 1; }),
                            max_load(p)};
  }
  if (name == "chimera") {
    // Both directions share each device: p + 1 half micro-batches in flight (1F1B per direction).
    auto rank = [](const Block& b) { return b.type == "forward" ? 1 : 0; };
    return BaselineSchedule{"chimera", greedy(p, m, rank, [&](int) { return P + 1; }), max_load(p)};
  }
  return sequential_schedule(p, m);
}

BaselineSchedule sequential_schedule(const BlockPlacement& p, int m) {
  const int nb = static_cast<int>(p.blocks.size());
  // Within a micro-batch, free memory as early as possible: among ready blocks, take the one
  // with the smallest memory delta (then the lowest index).
  auto pred = predecessors(p);
  std::vector<int> waiting(nb), order;
  auto succ = successors(p);
  for (int b = 0; b < nb; ++b) waiting[b] = static_cast<int>(pred[b].size());
  std::vector<std::pair<double, int>> ready;
  for (int b = 0; b < nb; ++b)
    if (!waiting[b]) ready.push_back({p.blocks[b].memory, b});
  while (!ready.empty()) {
    auto it = std::min_element(ready.begin(), ready.end());
    int b = it->second;
    ready.erase(it);
    order.push_back(b);
    for (int c : succ[b])
      if (--waiting[c] == 0) ready.push_back({p.blocks[c].memory, c});
  }
  std::vector<int> seq;
  for (int i = 0; i < m; ++i)
    for (int b : order) seq.push_back(i * nb + b);
  Schedule s = schedule_from_sequence(p, m, seq);
  double one = compute_stats(p, schedule_from_sequence(p, 1, order)).makespan;
  return {"sequential", std::move(s), one};
}

Schedule schedule_from_device_orders(const BlockPlacement& p, int m,
                                     const std::vector<std::vector<int>>& orders) {
  const int nb = static_cast<int>(p.blocks.size());
  const int n = m * nb;
  auto pred = predecessors(p);
  std::vector<bool> emitted(n, false);
  std::vector<size_t> next(p.num_devices, 0);
  std::vector<int> seq;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int d = 0; d < p.num_devices; ++d) {
      while (next[d] < orders[d].size()) {
        int op = orders[d][next[d]];
        const int micro = op / nb, b = op % nb;
        bool ok = std::all_of(pred[b].begin(), pred[b].end(),
                              [&](int a) { return emitted[micro * nb + a]; });
        for (int e : p.blocks[b].devices)
          ok = ok && next[e] < orders[e].size() && orders[e][next[e]] == op;
        if (!ok) break;
        emitted[op] = true;
        seq.push_back(op);
        for (int e : p.blocks[b].devices) ++next[e];
        progress = true;
      }
    }
  }
  HEDDLE_ASSERT(static_cast<int>(seq.size()) == n) << "device orders deadlock";
  return schedule_from_sequence(p, m, seq);
}

}  // namespace heddle::pipeline
