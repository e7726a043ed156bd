#include "heddle/runtime/CausalBlocks.h"

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "heddle/ir/Zigzag.h"

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

// The causal blocks of scores `v` that mask op `mask` hides: the shift and the zigzag order.
CausalBlocks blocks_of(const Graph& g, const Op& mask, ValueId v, bool result, int32_t operand) {
  const IVec& s = g.type(v).shape();
  CausalBlocks c{result, operand, s[s.size() - 1] - s[s.size() - 2]};
  auto z = mask.attrs.find(kZigzagAttr);
  const auto* n = z == mask.attrs.end() ? nullptr : std::get_if<int64_t>(&z->second);
  c.chunks = n ? *n : 0;
  c.extent = s[s.size() - 1];
  return c;
}

// The one index dim that tensor dim `t` of `p` reads, with coefficient 1; -1 when not so.
int64_t sole_dim(const IndexProjection& p, int64_t t) {
  int64_t i = -1;
  for (int64_t c = 0; c < p.index_rank(); ++c)
    if (p.map().at(t, c) != 0) {
      if (i >= 0 || p.map().at(t, c) != 1) return -1;
      i = c;
    }
  return i;
}

// Calls f(lo, hi) for each piece of [a, b) within one chunk of `size`.
template <class F>
void for_each_piece(int64_t a, int64_t b, int64_t size, F f) {
  while (a < b) {
    const int64_t e = std::min(b, (a / size + 1) * size);
    f(a, e);
    a = e;
  }
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
    if (next->kind == OpKind::kCausalMask) return blocks_of(g, *next, op.results[0].value, true, 0);
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
  return blocks_of(g, g.op(mask), p, false, static_cast<int32_t>(k));
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
  if (c.chunks > 1) return visible_part(c, op, box).empty();
  return b.start()[r - 1] > b.end()[r - 2] - 1 + c.shift;
}

Box visible_part(const CausalBlocks& c, const Op& op, const Box& box) {
  const Box none(box.start(), box.start());
  if (c.chunks <= 1) return hides(c, op, box) ? none : box;
  const IndexProjection& p = c.result ? op.results[c.operand].proj : op.inputs[c.operand].proj;
  const Box b = p.image(box);
  const int64_t r = b.rank();
  if (b.empty() || r < 2) return box;
  const int64_t iq = sole_dim(p, r - 2), ik = sole_dim(p, r - 1);
  const int64_t size = c.extent / c.chunks;
  auto pos = [&](int64_t x) { return zigzag_position(x, c.extent, c.chunks); };
  // The hull of the visible pieces, in tensor coordinates.
  int64_t q0 = b.end()[r - 2], q1 = b.start()[r - 2], k0 = b.end()[r - 1], k1 = b.start()[r - 1];
  for_each_piece(b.start()[r - 2], b.end()[r - 2], size, [&](int64_t qa, int64_t qb) {
    for_each_piece(b.start()[r - 1], b.end()[r - 1], size, [&](int64_t ka, int64_t kb) {
      if (pos(ka) > pos(qb - 1) + c.shift) return;  // every key of the piece past every query
      q0 = std::min(q0, qa);
      q1 = std::max(q1, qb);
      k0 = std::min(k0, ka);
      k1 = std::max(k1, kb);
    });
  });
  if (q0 >= q1) return none;
  if (iq < 0 || ik < 0 || iq == ik || p.window()[r - 2] != 1 || p.window()[r - 1] != 1) return box;
  std::vector<int64_t> lo(box.start().values()), hi(box.end().values());
  const IVec& off = p.map().offset();
  lo[iq] = q0 - off[r - 2];
  hi[iq] = q1 - off[r - 2];
  lo[ik] = k0 - off[r - 1];
  hi[ik] = k1 - off[r - 1];
  return Box(IVec(std::move(lo)), IVec(std::move(hi)));
}

}  // namespace heddle
