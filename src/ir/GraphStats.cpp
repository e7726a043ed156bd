#include "heddle/ir/GraphStats.h"

#include <algorithm>

namespace heddle {

double op_flops(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  auto volume = static_cast<double>(op.space.volume());
  double window = 1;
  for (const auto& in : op.inputs)
    window = std::max(window, static_cast<double>(in.proj.window().product()));
  switch (op_kind_info(op.kind).category) {
    case OpCategory::kContraction:
      return 2 * volume * window;
    case OpCategory::kWindow:
      return (op.space.has_reduce() ? 2 : 1) * volume * window;
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kSelect:
      return volume;
    case OpCategory::kReduction:
      return volume * window;
    case OpCategory::kNormalization:
      return 5 * volume * window;
    case OpCategory::kLoss:
      return 4 * volume * window;
    case OpCategory::kOptimizer:
      return (op.kind == OpKind::kAdamW ? 12 : 4) * volume;
    case OpCategory::kLayout:
      return 0;
  }
  return 0;
}

GraphStats graph_stats(const Graph& g) {
  GraphStats s;
  s.ops = g.num_ops();
  s.tensors = g.num_values();
  for (ValueId p : g.params()) {
    s.parameters += g.type(p).numel();
    s.parameter_bytes += g.type(p).bytes();
  }
  for (const Value& v : g.values())
    if (v.role == ValueRole::kResult) s.activation_bytes += v.type.bytes();
  for (OpId i = 0; i < g.num_ops(); ++i) s.flops += op_flops(g, i);
  return s;
}

}  // namespace heddle
