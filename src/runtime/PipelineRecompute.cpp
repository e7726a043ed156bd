#include "heddle/runtime/PipelineRecompute.h"

#include "heddle/support/Assert.h"

namespace heddle {

std::vector<bool> recomputed_forward_ops(const Graph& g, int64_t forward_ops, Recompute recompute) {
  HEDDLE_ASSERT(forward_ops >= 0 && forward_ops <= g.num_ops()) << forward_ops;
  const auto n = static_cast<size_t>(forward_ops);
  if (recompute != Recompute::kSelective)
    return std::vector<bool>(n, recompute == Recompute::kFull);
  std::vector<bool> out(n, false);
  for (OpId i = 0; i < forward_ops; ++i) {
    const Op& softmax = g.op(i);
    if (softmax.kind != OpKind::kSoftmax) continue;
    const IVec& shape = g.type(softmax.results[0].value).shape();
    out[static_cast<size_t>(i)] = true;
    // Back through the ops of the scores' shape: elementwise ops (scale, mask, add) up to the
    // contraction that made the scores.
    std::vector<ValueId> stack{softmax.inputs[0].value};
    while (!stack.empty()) {
      const Value& v = g.value(stack.back());
      stack.pop_back();
      if (v.role != ValueRole::kResult || v.producer >= forward_ops ||
          out[static_cast<size_t>(v.producer)] || v.type.shape() != shape)
        continue;
      const Op& op = g.op(v.producer);
      const bool contraction = op.kind == OpKind::kEinsum;
      if (!contraction && !is_elementwise(op.kind)) continue;
      out[static_cast<size_t>(v.producer)] = true;
      if (contraction) continue;
      for (const auto& in : op.inputs) stack.push_back(in.value);
    }
  }
  return out;
}

}  // namespace heddle
