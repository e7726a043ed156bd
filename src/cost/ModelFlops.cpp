#include "heddle/cost/ModelFlops.h"

#include <vector>

#include "heddle/cost/ComputeCost.h"
#include "heddle/ops/OpCost.h"
#include "heddle/support/Assert.h"

namespace heddle::cost {

double gpt_model_flops(const zoo::GptConfig& c, int64_t batch, bool train, bool full_recompute) {
  HEDDLE_ASSERT(batch >= 1);
  double B = static_cast<double>(batch), s = static_cast<double>(c.seq);
  double l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  double V = static_cast<double>(c.vocab);
  // Per token and layer 24 h^2 + 4 s h FLOPs forward (multiply-adds count 2), run once forward,
  // three times in training and four with full recomputation; the logits (2 h V per token) run
  // once forward and three times in training (they are not recomputed).
  double layer_passes = !train ? 1 : (full_recompute ? 4 : 3), logit_passes = train ? 3 : 1;
  return layer_passes * 24 * B * s * l * h * h * (1 + s / (6 * h)) +
         logit_passes * 2 * B * s * h * V;
}

double gpt_causal_model_flops(const zoo::GptConfig& c, int64_t batch, bool train) {
  HEDDLE_ASSERT(batch >= 1);
  double B = static_cast<double>(batch), s = static_cast<double>(c.seq);
  double l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  double V = static_cast<double>(c.vocab);
  // As gpt_model_flops() without recomputation, the 4 s h of attention per token halved.
  double passes = train ? 3 : 1;
  return passes * (24 * B * s * l * h * h * (1 + s / (12 * h)) + 2 * B * s * h * V);
}

namespace {

// The single op reading `v`, or -1.
OpId sole_consumer(const std::vector<std::vector<OpId>>& consumers, ValueId v) {
  const auto& users = consumers[static_cast<size_t>(v)];
  return users.size() == 1 ? users.front() : -1;
}

bool activation_contraction(const Graph& g, const Op& op) {
  if (op_kind_info(op.kind).category != OpCategory::kContraction || op.inputs.size() != 2)
    return false;
  for (const Operand& in : op.inputs)
    if (g.value(in.value).role == ValueRole::kParam) return false;
  return true;
}

}  // namespace

double causal_skipped_flops(const Graph& g) {
  std::vector<std::vector<OpId>> consumers(static_cast<size_t>(g.num_values()));
  for (OpId id = 0; id < g.num_ops(); ++id)
    for (const Operand& in : g.op(id).inputs)
      consumers[static_cast<size_t>(in.value)].push_back(id);
  double skipped = 0;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& mask = g.op(id);
    if (mask.kind != OpKind::kCausalMask || mask.inputs.size() != 1 || mask.results.size() != 1)
      continue;
    // Back to the scores' contraction.
    ValueId v = mask.inputs[0].value;
    while (true) {
      OpId p = g.value(v).producer;
      if (p == kNoOp) break;
      const Op& op = g.op(p);
      if (activation_contraction(g, op)) {
        skipped += op_cost(g, p).flops / 2;
        break;
      }
      if (!fusable(op.kind) || op.inputs.empty() || sole_consumer(consumers, v) < 0) break;
      v = op.inputs[0].value;
    }
    // On to the contraction with the values.
    v = mask.results[0].value;
    for (OpId c = sole_consumer(consumers, v); c >= 0; c = sole_consumer(consumers, v)) {
      const Op& op = g.op(c);
      if (activation_contraction(g, op)) {
        skipped += op_cost(g, c).flops / 2;
        break;
      }
      if (!fusable(op.kind) || op.results.size() != 1) break;
      v = op.results[0].value;
    }
  }
  return skipped;
}

}  // namespace heddle::cost
