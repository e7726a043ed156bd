#include "heddle/search/Reduction.h"

#include <map>
#include <numeric>

namespace heddle::search {

namespace {

constexpr double kForbidden = 1e30;

size_t choices(const StrategyGraph& sg, int v) {
  return sg.nodes[static_cast<size_t>(v)].cost.size();
}

// Re-roots every node decided by `from` onto `to`: `map[c]` is from's choice for choice c of
// `to`.
void reroot(Reduction& red, int from, int to, const std::vector<int>& map) {
  for (size_t w = 0; w < red.root.size(); ++w) {
    if (red.root[w] != from) continue;
    std::vector<int> t;
    t.reserve(map.size());
    for (int c : map) t.push_back(red.table[w][static_cast<size_t>(c)]);
    red.root[w] = to;
    red.table[w] = std::move(t);
  }
}

}  // namespace

Reduction identity_reduction(const StrategyGraph& sg) {
  Reduction red;
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    red.root.push_back(static_cast<int>(v));
    std::vector<int> id(sg.nodes[v].cost.size());
    std::iota(id.begin(), id.end(), 0);
    red.table.push_back(std::move(id));
  }
  red.node_weight.assign(sg.nodes.size(), 1.0);
  red.edge_weight.assign(sg.edges.size(), 1.0);
  red.reduced_nodes = static_cast<int>(sg.nodes.size());
  return red;
}

void merge_followers(const StrategyGraph& sg, const std::vector<int>& parent, Reduction& red) {
  // Edges into each node, by source, to price the follower's response.
  std::vector<std::vector<size_t>> into(sg.nodes.size());
  for (size_t e = 0; e < sg.edges.size(); ++e)
    into[static_cast<size_t>(sg.edges[e].to)].push_back(e);
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    int p = parent[v];
    if (p < 0) continue;
    HEDDLE_ASSERT(p < static_cast<int>(v) && red.root[v] == static_cast<int>(v))
        << "node " << v << " cannot follow node " << p;
    int r = red.root[static_cast<size_t>(p)];
    const auto& node = sg.nodes[v];
    std::vector<int> pick;
    for (int pc : red.table[static_cast<size_t>(p)]) {
      int best = 0;
      double best_cost = 0;
      for (size_t t = 0; t < node.cost.size(); ++t) {
        double c = node.cost[t];
        for (size_t e : into[v])
          if (sg.edges[e].from == p)
            c += sg.edges[e].cost[static_cast<size_t>(pc) * node.cost.size() + t];
        if (t == 0 || c < best_cost) best = static_cast<int>(t), best_cost = c;
      }
      pick.push_back(best);
    }
    red.root[v] = r;
    red.table[v] = std::move(pick);
  }
}

void tie_nodes(const StrategyGraph& sg, const std::vector<int>& same, Reduction& red) {
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    int u = same[v];
    if (u < 0) continue;
    HEDDLE_ASSERT(u < static_cast<int>(v) && choices(sg, u) == choices(sg, static_cast<int>(v)))
        << "node " << v << " cannot be tied to node " << u;
    int from = red.root[v], to = red.root[static_cast<size_t>(u)];
    if (from == to) continue;
    // v's root chooses what makes v choose as u does: v's choice k comes from its root's choice
    // inv[k] (v was a root or the copy of one, so its table is a permutation-free lookup).
    std::vector<int> inv(choices(sg, from), -1);
    for (size_t c = 0; c < red.table[v].size(); ++c)
      if (inv[static_cast<size_t>(red.table[v][c])] < 0)
        inv[static_cast<size_t>(red.table[v][c])] = static_cast<int>(c);
    std::vector<int> map;
    for (int k : red.table[static_cast<size_t>(u)]) {
      HEDDLE_ASSERT(inv[static_cast<size_t>(k)] >= 0) << "tied node " << v << " lacks choice " << k;
      map.push_back(inv[static_cast<size_t>(k)]);
    }
    reroot(red, from, to, map);
  }
}

void finish_reduction(Reduction& red) {
  std::map<int, int> number;
  for (int r : red.root) number.emplace(r, 0);
  int n = 0;
  for (auto& [r, k] : number) k = n++;
  for (int& r : red.root) r = number.at(r);
  red.reduced_nodes = n;
}

StrategyGraph reduce_strategy_graph(const StrategyGraph& sg, const Reduction& red) {
  StrategyGraph out;
  out.memory_limit = sg.memory_limit;
  out.nodes.resize(static_cast<size_t>(red.reduced_nodes));
  // A root's choice count is its own table's length (every node it decides has a table that
  // long).
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    auto& n = out.nodes[static_cast<size_t>(red.root[v])];
    size_t k = red.table[v].size();
    if (n.cost.empty()) n.cost.assign(k, 0), n.memory.assign(k, 0);
    HEDDLE_ASSERT(n.cost.size() == k) << "node " << v << " disagrees on its root's choices";
    double w = red.node_weight[v];
    for (size_t c = 0; c < k; ++c) {
      double cost = sg.nodes[v].cost[static_cast<size_t>(red.table[v][c])];
      n.cost[c] = cost >= kForbidden ? kForbidden : std::min(n.cost[c] + w * cost, kForbidden);
      n.memory[c] += w * sg.nodes[v].memory[static_cast<size_t>(red.table[v][c])];
    }
  }
  std::map<std::pair<int, int>, size_t> edge_of;
  for (size_t e = 0; e < sg.edges.size(); ++e) {
    const auto& E = sg.edges[e];
    double w = red.edge_weight[e];
    if (w == 0) continue;
    size_t a = static_cast<size_t>(E.from), b = static_cast<size_t>(E.to);
    size_t nb = sg.nodes[b].cost.size();
    int ra = red.root[a], rb = red.root[b];
    auto at = [&](int ca, int cb) {
      return E.cost[static_cast<size_t>(red.table[a][static_cast<size_t>(ca)]) * nb +
                    static_cast<size_t>(red.table[b][static_cast<size_t>(cb)])];
    };
    if (ra == rb) {
      auto& n = out.nodes[static_cast<size_t>(ra)];
      for (size_t c = 0; c < n.cost.size(); ++c) {
        double x = at(static_cast<int>(c), static_cast<int>(c));
        n.cost[c] = x >= kForbidden ? kForbidden : std::min(n.cost[c] + w * x, kForbidden);
      }
      continue;
    }
    bool flip = ra > rb;
    int lo = flip ? rb : ra, hi = flip ? ra : rb;
    size_t nlo = out.nodes[static_cast<size_t>(lo)].cost.size();
    size_t nhi = out.nodes[static_cast<size_t>(hi)].cost.size();
    auto [it, fresh] = edge_of.emplace(std::make_pair(lo, hi), out.edges.size());
    if (fresh) out.edges.push_back({lo, hi, std::vector<double>(nlo * nhi, 0.0)});
    auto& M = out.edges[it->second].cost;
    for (size_t i = 0; i < nlo; ++i)
      for (size_t j = 0; j < nhi; ++j) {
        double x = flip ? at(static_cast<int>(j), static_cast<int>(i))
                        : at(static_cast<int>(i), static_cast<int>(j));
        double& m = M[i * nhi + j];
        m = x >= kForbidden ? kForbidden : std::min(m + w * x, kForbidden);
      }
  }
  return out;
}

std::vector<int> expand_choice(const Reduction& red, const std::vector<int>& reduced) {
  std::vector<int> out;
  for (size_t v = 0; v < red.root.size(); ++v)
    out.push_back(red.table[v][static_cast<size_t>(reduced[static_cast<size_t>(red.root[v])])]);
  return out;
}

}  // namespace heddle::search
