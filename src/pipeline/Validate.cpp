#include "heddle/pipeline/Validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace heddle::pipeline {

namespace {

std::string op_name(const BlockPlacement& p, int nb, int op) {
  return fmt::format("'{}' of micro-batch {}", p.blocks[op % nb].name, op / nb);
}

}  // namespace

Status validate_schedule(const BlockPlacement& p, const Schedule& s, double memory_limit) {
  const int nb = static_cast<int>(p.blocks.size());
  if (s.blocks != nb || s.micro_batches < 0 ||
      s.start.size() != static_cast<size_t>(s.micro_batches) * nb) {
    return Diagnostic(
        fmt::format("the schedule has {} start times for {} micro-batches of {} "
                    "blocks; the placement has {} blocks",
                    s.start.size(), s.micro_batches, s.blocks, nb));
  }
  for (int op = 0; op < s.num_ops(); ++op) {
    if (!std::isfinite(s.start[op]) || s.start[op] < -kTimeEpsilon) {
      return Diagnostic(fmt::format("{} starts at {}; starts must be finite and >= 0",
                                    op_name(p, nb, op), s.start[op]));
    }
  }
  // Dependencies.
  for (int i = 0; i < s.micro_batches; ++i) {
    for (auto [a, b] : p.deps) {
      double end_a = s.at(i, a) + p.blocks[a].span;
      if (s.at(i, b) < end_a - kTimeEpsilon) {
        return Diagnostic(
            fmt::format("dependency broken: {} starts at {} before its dependency "
                        "'{}' ends at {}",
                        op_name(p, nb, i * nb + b), s.at(i, b), p.blocks[a].name, end_a));
      }
    }
  }
  // Exclusivity and memory, device by device in start order.
  std::vector<std::vector<std::pair<double, int>>> per_dev(p.num_devices);
  for (int op = 0; op < s.num_ops(); ++op)
    for (int d : p.blocks[op % nb].devices) per_dev[d].push_back({s.start[op], op});
  for (int d = 0; d < p.num_devices; ++d) {
    auto& v = per_dev[d];
    std::sort(v.begin(), v.end());
    double mem = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      auto [t, op] = v[k];
      if (k > 0) {
        auto [t0, op0] = v[k - 1];
        double end0 = t0 + p.blocks[op0 % nb].span;
        if (t < end0 - kTimeEpsilon) {
          return Diagnostic(
              fmt::format("device {} runs two blocks at once: {} during [{}, {}) "
                          "and {} from {}",
                          d, op_name(p, nb, op0), t0, end0, op_name(p, nb, op), t));
        }
      }
      mem += p.blocks[op % nb].memory;
      if (mem > memory_limit + kTimeEpsilon) {
        return Diagnostic(
            fmt::format("device {} needs memory {} when {} starts at {}, above the "
                        "limit {}",
                        d, mem, op_name(p, nb, op), t, memory_limit));
      }
    }
  }
  return {};
}

}  // namespace heddle::pipeline
