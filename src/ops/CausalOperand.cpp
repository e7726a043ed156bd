#include "heddle/ops/CausalOperand.h"

#include <algorithm>

#include "KernelUtil.h"
#include "heddle/ir/Zigzag.h"

namespace heddle::kernels {

namespace {

using kdetail::same_coordinates;

// An op whose every operand and result is on the same coordinates (one element per point).
bool pointwise(const Op& op) {
  if (op.results.size() != 1 || !same_coordinates(op.results[0].proj)) return false;
  return std::all_of(op.inputs.begin(), op.inputs.end(),
                     [&](const Operand& x) { return x.proj == op.results[0].proj && !x.padded; });
}

bool is_fn(const Op& op, OpKind grad_of) {
  return op.kind == OpKind::kElementwiseGrad && kdetail::attr_s(op, "fn") == op_kind_name(grad_of);
}

// A causal mask (or its gradient) in sequence order on the same coordinates as its input.
bool plain_mask(const Op& op) { return pointwise(op) && kdetail::attr_i(op, kZigzagAttr, 1) <= 1; }

bool is_output(const Graph& g, ValueId v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// The ops reading `v`.
std::vector<const Op*> readers(const Graph& g, ValueId v) {
  std::vector<const Op*> out;
  for (const Op& u : g.ops())
    if (std::any_of(u.inputs.begin(), u.inputs.end(),
                    [&](const Operand& x) { return x.value == v; }))
      out.push_back(&u);
  return out;
}

// Probabilities: `p` is the softmax over the last dim of a plain causal mask's result.
bool masked_probabilities(const Graph& g, ValueId p) {
  const OpId s = g.value(p).producer;
  if (s == kNoOp || g.op(s).kind != OpKind::kSoftmax || g.op(s).inputs.size() != 1) return false;
  const Op& soft = g.op(s);
  const int64_t rank = g.type(p).rank();
  if (rank < 2 || kdetail::attr_i(soft, "axis", -1) != rank - 1) return false;
  const OpId m = g.value(soft.inputs[0].value).producer;
  return m != kNoOp && g.op(m).kind == OpKind::kCausalMask && plain_mask(g.op(m)) &&
         g.type(soft.inputs[0].value).shape() == g.type(p).shape();
}

// Exactly zero where a causal mask hides it: probabilities, a mask's gradient, and either scaled.
bool zero_where_hidden(const Graph& g, ValueId v) {
  for (int hops = 0; hops < 4; ++hops) {
    if (masked_probabilities(g, v)) return true;
    const OpId id = g.value(v).producer;
    if (id == kNoOp) return false;
    const Op& op = g.op(id);
    if (!pointwise(op) || op.inputs.empty()) return false;
    if (is_fn(op, OpKind::kCausalMask)) return plain_mask(op);
    if (op.kind != OpKind::kScale && !is_fn(op, OpKind::kScale)) return false;
    v = op.inputs[0].value;  // scale (of x) or its gradient (of dy): 0 stays 0
  }
  return false;
}

// Scores: `v`'s values are read only through scale ops into a plain causal mask (gradients of
// scale and of the mask read its tile, not its values), or only as softmax's gradient dy beside
// probabilities (times their exact zeros).
bool hidden_unread(const Graph& g, ValueId v) {
  for (int hops = 0; hops < 8; ++hops) {
    if (is_output(g, v)) return false;
    const Op* next = nullptr;
    for (const Op* u : readers(g, v)) {
      if (is_fn(*u, OpKind::kScale) || is_fn(*u, OpKind::kCausalMask)) {
        if (u->inputs[0].value == v) return false;  // read as dy: its values count
        continue;
      }
      if (next) return false;
      next = u;
    }
    if (!next || next->inputs[0].value != v) return false;
    // softmax's gradient from its output y: dx = y (dy - sum(dy y)) along rows of y's elements.
    if (next->kind == OpKind::kNormGrad && kdetail::attr_s(*next, "fn") == "softmax_out")
      return next->inputs.size() == 2 && next->inputs[1].value != v &&
             next->inputs[1].proj == next->inputs[0].proj && !next->inputs[0].padded &&
             !next->inputs[1].padded && masked_probabilities(g, next->inputs[1].value) &&
             g.type(next->inputs[1].value).shape() == g.type(v).shape();
    if (!pointwise(*next)) return false;
    if (next->kind == OpKind::kCausalMask) return plain_mask(*next);
    if (next->kind != OpKind::kScale) return false;
    v = next->results[0].value;
  }
  return false;
}

}  // namespace

std::optional<CausalOperand> causal_operand(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  if (op.kind == OpKind::kSoftmax && op.results.size() == 1 &&
      masked_probabilities(g, op.results[0].value)) {
    const IVec& s = g.type(op.results[0].value).shape();
    return CausalOperand{false, 0, s[s.size() - 1] - s[s.size() - 2]};
  }
  if (op.kind != OpKind::kEinsum || op.results.size() != 1 || op.inputs.size() != 2)
    return std::nullopt;
  auto of = [&](ValueId v, bool result, int32_t k) -> std::optional<CausalOperand> {
    const IVec& s = g.type(v).shape();
    if (s.size() < 2) return std::nullopt;
    return CausalOperand{result, k, s[s.size() - 1] - s[s.size() - 2]};
  };
  const ValueId r = op.results[0].value;
  if (g.type(r).rank() >= 2 && hidden_unread(g, r)) return of(r, true, 0);
  for (int32_t k = 0; k < 2; ++k)
    if (g.type(op.inputs[k].value).rank() >= 2 && zero_where_hidden(g, op.inputs[k].value))
      return of(op.inputs[k].value, false, k);
  return std::nullopt;
}

}  // namespace heddle::kernels
