#include "heddle/runtime/StageSplit.h"

#include <cctype>
#include <set>

#include "heddle/support/Assert.h"

namespace heddle {

std::string layer_of_param(const std::string& name) {
  std::string head = name.substr(0, name.find('.'));
  size_t k = head.size();
  while (k > 0 && std::isdigit(static_cast<unsigned char>(head[k - 1]))) --k;
  if (k == 0 || k == head.size()) return "";
  for (size_t i = 0; i < k; ++i)
    if (!std::isalpha(static_cast<unsigned char>(head[i])) && head[i] != '_') return "";
  return head;
}

Result<std::vector<int64_t>> split_stages(const Graph& g, int64_t chunks,
                                          const std::vector<int64_t>& units) {
  HEDDLE_ASSERT(chunks >= 1) << "chunks " << chunks;
  const int64_t n = g.num_ops();
  if (n < chunks)
    return Diagnostic(g.name() + " has " + std::to_string(n) + " ops, fewer than the " +
                      std::to_string(chunks) + " pipeline chunks asked for");
  // Where each layer starts: the first op reading one of its parameters.
  std::vector<int64_t> layer_start;
  std::set<std::string> seen;
  for (OpId i = 0; i < n; ++i)
    for (const auto& in : g.op(i).inputs) {
      const Value& v = g.value(in.value);
      if (v.role != ValueRole::kParam) continue;
      std::string layer = layer_of_param(v.name);
      if (layer.empty() || !seen.insert(layer).second) continue;
      if (layer_start.empty() || layer_start.back() != i) layer_start.push_back(i);
    }
  std::vector<int64_t> starts = {0};
  const auto layers = static_cast<int64_t>(layer_start.size());
  if (!units.empty()) {
    std::string given;
    int64_t sum = 0;
    for (int64_t u : units) {
      given += (given.empty() ? "" : "/") + std::to_string(u);
      sum += u;
      if (u < 1) return Diagnostic("layers=" + given + "...: every chunk needs at least one unit");
    }
    if (static_cast<int64_t>(units.size()) != chunks)
      return Diagnostic("layers=" + given + " has " + std::to_string(units.size()) +
                        " entries for " + std::to_string(chunks) + " pipeline chunks");
    if (layers == 0 || layers % sum != 0)
      return Diagnostic("layers=" + given + " splits " + std::to_string(sum) + " units, but " +
                        g.name() + " has " + std::to_string(layers) +
                        " layers (by parameter names), not a multiple");
    int64_t next = 0;
    for (int64_t c = 0; c + 1 < chunks; ++c) {
      next += units[static_cast<size_t>(c)] * (layers / sum);
      starts.push_back(layer_start[static_cast<size_t>(next)]);
    }
    starts.push_back(g.num_ops());
    for (size_t c = 0; c + 1 < starts.size(); ++c)
      if (starts[c] >= starts[c + 1])
        return Diagnostic("layers=" + given + ": chunk " + std::to_string(c) + " of " + g.name() +
                          " would be empty");
    return starts;
  }
  if (layers >= chunks) {
    int64_t next = 0;
    for (int64_t c = 0; c + 1 < chunks; ++c) {
      next += layers / chunks + (c < layers % chunks ? 1 : 0);
      starts.push_back(layer_start[static_cast<size_t>(next)]);
    }
  } else {
    for (int64_t c = 1; c < chunks; ++c) starts.push_back(c * n / chunks);
  }
  starts.push_back(n);
  for (size_t c = 0; c + 1 < starts.size(); ++c)
    if (starts[c] >= starts[c + 1]) {  // a layer starting at op 0: fall back to equal runs
      starts = {0};
      for (int64_t k = 1; k < chunks; ++k) starts.push_back(k * n / chunks);
      starts.push_back(n);
      break;
    }
  return starts;
}

}  // namespace heddle
