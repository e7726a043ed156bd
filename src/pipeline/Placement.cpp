#include "heddle/pipeline/Placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>

#include "heddle/support/Hash.h"
#include "heddle/support/Strings.h"

namespace heddle::pipeline {

namespace {

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

}  // namespace

std::string Block::to_string() const {
  std::vector<std::string> devs;
  for (int d : devices) devs.push_back(std::to_string(d));
  return fmt::format("{}:{}[span={}, mem={}, dev=[{}]]", name, type, number(span), number(memory),
                     join(devs, ","));
}

std::string BlockPlacement::to_string() const {
  std::string s = fmt::format("placement {} ({} devices, {} blocks)\n", name.empty() ? "?" : name,
                              num_devices, blocks.size());
  for (const Block& b : blocks) s += "  " + b.to_string() + "\n";
  for (auto [a, b] : deps) {
    s += fmt::format("  {} -> {}\n", blocks.at(a).name, blocks.at(b).name);
  }
  return s;
}

size_t BlockPlacement::hash() const {
  size_t h = 0;
  hash_combine(h, name);
  hash_combine(h, family);
  hash_combine(h, chunks);
  hash_combine(h, num_devices);
  for (const Block& b : blocks) {
    hash_combine(h, b.name);
    hash_combine(h, b.type);
    hash_combine(h, b.span);
    hash_combine(h, b.memory);
    for (int d : b.devices) hash_combine(h, d);
  }
  for (auto [a, b] : deps) {
    hash_combine(h, a);
    hash_combine(h, b);
  }
  return h;
}

Status check_placement(const BlockPlacement& p, const std::string& file) {
  SourceLoc loc{file, 0, 0};
  if (p.num_devices < 1) {
    return Diagnostic(
        loc, fmt::format("the placement needs at least one device, got {}", p.num_devices));
  }
  if (p.blocks.empty()) return Diagnostic(loc, "the placement has no blocks");
  std::set<std::string> names;
  for (const Block& b : p.blocks) {
    if (b.name.empty()) return Diagnostic(loc, "a block has an empty name; give every block one");
    if (!names.insert(b.name).second) {
      return Diagnostic(loc,
                        fmt::format("block name '{}' is used twice; names must be unique", b.name));
    }
    if (!(b.span > 0) || !std::isfinite(b.span)) {
      return Diagnostic(loc, fmt::format("block '{}' has span {}; spans must be positive", b.name,
                                         number(b.span)));
    }
    if (!std::isfinite(b.memory)) {
      return Diagnostic(loc, fmt::format("block '{}' has a non-finite memory delta", b.name));
    }
    if (b.devices.empty()) {
      return Diagnostic(loc, fmt::format("block '{}' is on no device; list at least one", b.name));
    }
    std::set<int> seen;
    for (int d : b.devices) {
      if (d < 0 || d >= p.num_devices) {
        return Diagnostic(loc, fmt::format("block '{}' is on device {}, which does not exist: the "
                                           "placement has {} devices (0 to {})",
                                           b.name, d, p.num_devices, p.num_devices - 1));
      }
      if (!seen.insert(d).second) {
        return Diagnostic(loc, fmt::format("block '{}' lists device {} twice", b.name, d));
      }
    }
  }
  const int n = static_cast<int>(p.blocks.size());
  for (auto [a, b] : p.deps) {
    if (a < 0 || a >= n || b < 0 || b >= n) {
      return Diagnostic(loc, "a dependency refers to a block that does not exist");
    }
    if (a == b) {
      return Diagnostic(loc, fmt::format("block '{}' depends on itself", p.blocks[a].name));
    }
  }
  // Kahn's algorithm; whatever is left over lies on or behind a cycle.
  auto succ = successors(p);
  std::vector<int> indeg(n, 0);
  for (int a = 0; a < n; ++a)
    for (int b : succ[a]) ++indeg[b];
  std::vector<int> stack;
  for (int b = 0; b < n; ++b)
    if (indeg[b] == 0) stack.push_back(b);
  int done = 0;
  while (!stack.empty()) {
    int a = stack.back();
    stack.pop_back();
    ++done;
    for (int b : succ[a])
      if (--indeg[b] == 0) stack.push_back(b);
  }
  if (done != n) {
    // Walk backwards along unfinished predecessors until a block repeats: that is a cycle.
    auto pred = predecessors(p);
    int cur = 0;
    while (indeg[cur] == 0) ++cur;
    std::vector<int> path;
    std::map<int, size_t> at;
    while (!at.count(cur)) {
      at[cur] = path.size();
      path.push_back(cur);
      for (int a : pred[cur]) {
        if (indeg[a] > 0) {
          cur = a;
          break;
        }
      }
    }
    std::vector<std::string> cycle;
    for (size_t i = path.size(); i-- > at[cur];) cycle.push_back(p.blocks[path[i]].name);
    cycle.push_back(cycle.front());
    return Diagnostic(loc, fmt::format("the dependencies have a cycle: {}; dependencies must "
                                       "form a DAG",
                                       join(cycle, " -> ")));
  }
  return {};
}

std::vector<std::vector<int>> predecessors(const BlockPlacement& p) {
  std::vector<std::vector<int>> pred(p.blocks.size());
  for (auto [a, b] : p.deps) pred[b].push_back(a);
  for (auto& v : pred) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return pred;
}

std::vector<std::vector<int>> successors(const BlockPlacement& p) {
  std::vector<std::vector<int>> succ(p.blocks.size());
  for (auto [a, b] : p.deps) succ[a].push_back(b);
  for (auto& v : succ) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return succ;
}

std::vector<int> topological_order(const BlockPlacement& p) {
  const int n = static_cast<int>(p.blocks.size());
  auto succ = successors(p);
  std::vector<int> indeg(n, 0);
  for (int a = 0; a < n; ++a)
    for (int b : succ[a]) ++indeg[b];
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int b = 0; b < n; ++b)
    if (indeg[b] == 0) ready.push(b);
  std::vector<int> order;
  while (!ready.empty()) {
    int a = ready.top();
    ready.pop();
    order.push_back(a);
    for (int b : succ[a])
      if (--indeg[b] == 0) ready.push(b);
  }
  HEDDLE_ASSERT(static_cast<int>(order.size()) == n) << "topological_order of a cyclic placement";
  return order;
}

std::vector<double> device_loads(const BlockPlacement& p) {
  std::vector<double> load(p.num_devices, 0.0);
  for (const Block& b : p.blocks)
    for (int d : b.devices) load[d] += b.span;
  return load;
}

bool has_integer_spans(const BlockPlacement& p) {
  return std::all_of(p.blocks.begin(), p.blocks.end(),
                     [](const Block& b) { return b.span == std::floor(b.span); });
}

}  // namespace heddle::pipeline
