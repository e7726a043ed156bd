#include "heddle/runtime/CausalBlocks.h"

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

namespace heddle {

namespace {

// True when `p` maps each index dim to the same tensor dim with a unit window.
bool identity(const IndexProjection& p) {
  return p.map() == AffineMap::identity(p.index_rank()) && p.tensor_rank() == p.index_rank() &&
         std::all_of(p.window().begin(), p.window().end(), [](int64_t w) { return w == 1; });
}

// A unary elementwise op on the same coordinates as its input: its result at a point depends on
// its input at that point only.
bool pointwise(const Op& op) {
  return op.inputs.size() == 1 && op.results.size() == 1 && identity(op.inputs[0].proj) &&
         op.results[0].proj == op.inputs[0].proj;
}

// The gradient of `scale` or `causal_mask`: reads its forward input's tile but not its values.
bool gradient_ignoring_x(const Op& op) {
  if (op.kind != OpKind::kElementwiseGrad) return false;
  auto fn = op.attrs.find("fn");
  if (fn == op.attrs.end()) return false;
  const auto* f = std::get_if<std::string>(&fn->second);
  return f && (*f == op_kind_name(OpKind::kScale) || *f == op_kind_name(OpKind::kCausalMask));
}

bool is_output(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs())
    if (o == v) return true;
  return false;
}

int64_t shift_of(const Graph& g, ValueId v) {
  const IVec& s = g.type(v).shape();
  return s[s.size() - 1] - s[s.size() - 2];
}

// Scores: op `id`'s one result reaches a causal mask through pointwise ops only.
std::optional<CausalBlocks> masked_scores(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  if (op.results.size() != 1 || g.type(op.results[0].value).rank() < 2) return std::nullopt;
  ValueId v = op.results[0].value;
  for (int hops = 0; hops < 8; ++hops) {
    if (is_output(g, v)) return std::nullopt;
    const Op* next = nullptr;
    for (OpId c = 0; c < g.num_ops(); ++c) {
      const Op& u = g.op(c);
      bool reads = false;
      for (const auto& x : u.inputs) reads |= x.value == v;
      if (!reads) continue;
      if (gradient_ignoring_x(u)) continue;
      if (next || !pointwise(u) || u.inputs[0].value != v) return std::nullopt;
      next = &u;
    }
    if (!next) return std::nullopt;
    if (next->kind == OpKind::kCausalMask)
      return CausalBlocks{true, 0, shift_of(g, op.results[0].value)};
    if (next->kind != OpKind::kScale) return std::nullopt;  // one that keeps hidden values unread
    v = next->results[0].value;
  }
  return std::nullopt;
}

// Probabilities: input `k` of op `id` is the softmax over the last dim of a causal mask.
std::optional<CausalBlocks> masked_probabilities(const Graph& g, OpId id, size_t k) {
  const ValueId p = g.op(id).inputs[k].value;
  const OpId s = g.value(p).producer;
  if (s == kNoOp || g.op(s).kind != OpKind::kSoftmax) return std::nullopt;
  const Op& soft = g.op(s);
  auto axis = soft.attrs.find("axis");
  const auto* a = axis == soft.attrs.end() ? nullptr : std::get_if<int64_t>(&axis->second);
  const int64_t rank = g.type(p).rank();
  if (!a || *a != rank - 1 || rank < 2 || soft.inputs.size() != 1) return std::nullopt;
  const ValueId m = soft.inputs[0].value;
  const OpId mask = g.value(m).producer;
  if (mask == kNoOp || g.op(mask).kind != OpKind::kCausalMask || !pointwise(g.op(mask)) ||
      g.type(m).shape() != g.type(p).shape())
    return std::nullopt;
  return CausalBlocks{false, static_cast<int32_t>(k), shift_of(g, p)};
}

}  // namespace

std::optional<CausalBlocks> causal_blocks(const Graph& g, OpId id, size_t ring_input, bool reduce) {
  const Op& op = g.op(id);
  if (!reduce) return masked_scores(g, id);
  if (op.inputs.size() != 2) return std::nullopt;
  return masked_probabilities(g, id, 1 - ring_input);
}

bool hides(const CausalBlocks& c, const Op& op, const Box& box) {
  const IndexProjection& p = c.result ? op.results[c.operand].proj : op.inputs[c.operand].proj;
  const Box b = p.image(box);
  const int64_t r = b.rank();
  if (b.empty() || r < 2) return false;
  // The smallest key coordinate beyond the largest query coordinate (plus the shift).
  return b.start()[r - 1] > b.end()[r - 2] - 1 + c.shift;
}

}  // namespace heddle
