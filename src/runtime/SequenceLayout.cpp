#include "heddle/runtime/SequenceLayout.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <variant>

#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Zigzag.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace {

// Union-find over every tensor dim of every value and every index dim of every op.
class DimLinks {
 public:
  explicit DimLinks(const Graph& g) {
    int64_t n = 0;
    for (ValueId v = 0; v < g.num_values(); ++v) {
      value_at_.push_back(n);
      n += g.type(v).rank();
    }
    for (OpId o = 0; o < g.num_ops(); ++o) {
      op_at_.push_back(n);
      n += g.op(o).space.rank();
    }
    parent_.resize(static_cast<size_t>(n));
    std::iota(parent_.begin(), parent_.end(), int64_t{0});
  }
  int64_t value(ValueId v, int64_t d) const { return value_at_[static_cast<size_t>(v)] + d; }
  int64_t index(OpId o, int64_t i) const { return op_at_[static_cast<size_t>(o)] + i; }
  int64_t find(int64_t x) {
    while (parent_[static_cast<size_t>(x)] != x)
      x = parent_[static_cast<size_t>(x)] = parent_[static_cast<size_t>(parent_[x])];
    return x;
  }
  void join(int64_t a, int64_t b) { parent_[static_cast<size_t>(find(a))] = find(b); }

 private:
  std::vector<int64_t> value_at_, op_at_, parent_;
};

// The index dim that row `t` of `p` reads one to one: alone, coefficient 1, no offset, a unit
// window, over the tensor dim's whole extent; -1 otherwise.
int64_t plain_dim(const Op& op, const IndexProjection& p, int64_t t, int64_t extent) {
  int64_t i = -1;
  for (int64_t c = 0; c < p.index_rank(); ++c)
    if (p.map().at(t, c) != 0) {
      if (i >= 0 || p.map().at(t, c) != 1) return -1;
      i = c;
    }
  if (i < 0 || p.map().offset()[t] != 0 || p.window()[t] != 1) return -1;
  return op.space.dim(i).extent == extent ? i : -1;
}

// Row `t` of `p` reads no index dim and its window covers the whole dim (a normalization's row).
bool whole_row(const IndexProjection& p, int64_t t, int64_t extent) {
  for (int64_t c = 0; c < p.index_rank(); ++c)
    if (p.map().at(t, c) != 0) return false;
  return p.map().offset()[t] == 0 && p.window()[t] == extent;
}

bool masks(const Op& op) {
  if (op.kind == OpKind::kCausalMask) return true;
  if (op.kind != OpKind::kElementwiseGrad) return false;
  auto fn = op.attrs.find("fn");
  const auto* f = fn == op.attrs.end() ? nullptr : std::get_if<std::string>(&fn->second);
  return f && *f == op_kind_name(OpKind::kCausalMask);
}

// A dim of an operand that an op reads other than one to one.
struct Irregular {
  OpId op = -1;
  ValueId value = -1;
  int64_t dim = -1;
};

std::string op_ref(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  return "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
         value_ref(g.value(op.results[0].value).name);
}

}  // namespace

Result<SequenceLayout> zigzag_layout(const Graph& g, int64_t cp) {
  HEDDLE_ASSERT(cp >= 2) << "zigzag over cp=" << cp;
  DimLinks links(g);
  std::vector<Irregular> irregular;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    const bool norm = op_kind_info(op.kind).category == OpCategory::kNormalization &&
                      op.kind != OpKind::kTopkGating;
    std::vector<const Operand*> operands;
    for (const auto& x : op.inputs) operands.push_back(&x);
    for (const auto& x : op.results) operands.push_back(&x);
    const int64_t out_rank = g.type(op.results[0].value).rank();
    for (const Operand* x : operands) {
      const IVec& shape = g.type(x->value).shape();
      for (int64_t t = 0; t < shape.size(); ++t) {
        const int64_t i = plain_dim(op, x->proj, t, shape[t]);
        if (i >= 0) {
          links.join(links.value(x->value, t), links.index(id, i));
        } else if (norm && shape.size() == out_rank && whole_row(x->proj, t, shape[t])) {
          links.join(links.value(x->value, t), links.value(op.results[0].value, t));
        } else {
          irregular.push_back({id, x->value, t});
        }
      }
    }
  }
  // The sequence: dim 1 of every input of rank >= 2, as cp splits them.
  int64_t seq = -1, extent = 0;
  for (ValueId v : g.inputs()) {
    if (g.type(v).rank() < 2) continue;
    const int64_t s = g.type(v).shape()[1];
    if (seq >= 0 && s != extent)
      return Diagnostic("zigzag layout: the inputs' sequence dims differ (" +
                        std::to_string(extent) + " and " + std::to_string(s) + " in " +
                        value_ref(g.value(v).name) + ")");
    if (seq >= 0) links.join(links.value(v, 1), seq);
    seq = links.value(v, 1);
    extent = s;
  }
  if (seq < 0) return Diagnostic("zigzag layout: the graph has no input with a sequence dim");
  if (extent % (2 * cp) != 0)
    return Diagnostic("zigzag layout: 2*cp = " + std::to_string(2 * cp) +
                      " chunks do not divide the sequence of " + std::to_string(extent));
  auto in_seq = [&](ValueId v, int64_t d) {
    return links.find(links.value(v, d)) == links.find(seq);
  };
  for (const Irregular& x : irregular) {
    const Op& op = g.op(x.op);
    bool hit = in_seq(x.value, x.dim);
    const IndexProjection* p = nullptr;
    for (const auto& o : op.inputs)
      if (o.value == x.value) p = &o.proj;
    for (const auto& o : op.results)
      if (o.value == x.value) p = &o.proj;
    for (int64_t c = 0; p && c < p->index_rank(); ++c)
      hit |= p->map().at(x.dim, c) != 0 && links.find(links.index(x.op, c)) == links.find(seq);
    if (hit)
      return Diagnostic("zigzag layout: " + op_ref(g, x.op) + " reads dim " +
                        std::to_string(x.dim) + " of " + value_ref(g.value(x.value).name) +
                        ", a sequence dim, other than one to one");
  }
  SequenceLayout out;
  out.chunks = 2 * cp;
  out.extent = extent;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    const ValueId r = op.results[0].value;
    const int64_t rank = g.type(r).rank();
    if (op.kind == OpKind::kTopkGating) {
      for (int64_t d = 0; d < rank; ++d)
        if (in_seq(r, d) || in_seq(op.inputs[0].value, d))
          return Diagnostic("zigzag layout: " + op_ref(g, id) + " depends on the tokens' order");
    } else if (masks(op) && rank >= 2) {
      const bool q = in_seq(r, rank - 2), k = in_seq(r, rank - 1);
      if (q != k)
        return Diagnostic("zigzag layout: " + op_ref(g, id) +
                          " masks a sequence dim by a dim that is not one");
      if (q) out.positional.push_back(id);
    } else if ((op.kind == OpKind::kRotary || op.kind == OpKind::kRotaryGrad) && rank >= 3 &&
               in_seq(op.inputs[0].value, rank - 3)) {
      out.positional.push_back(id);
    }
  }
  std::vector<ValueId> edges = g.inputs();
  edges.insert(edges.end(), g.params().begin(), g.params().end());
  edges.insert(edges.end(), g.outputs().begin(), g.outputs().end());
  for (ValueId v : edges)
    for (int64_t d = 0; d < g.type(v).rank(); ++d)
      if (in_seq(v, d)) {
        auto& dims = out.dims[v];
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
      }
  return out;
}

Graph with_layout(const Graph& g, const SequenceLayout& layout) {
  Graph out = g;
  if (layout.in_order()) return out;
  for (OpId id : layout.positional) out.set_attr(id, kZigzagAttr, layout.chunks);
  return out;
}

Tensor permute_sequence(const Tensor& t, int64_t dim, int64_t chunks, bool back) {
  const IVec& shape = t.shape();
  const int64_t n = shape[dim];
  HEDDLE_ASSERT(chunks >= 1 && n % chunks == 0) << chunks << " chunks of " << n;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t c = n / chunks;
  Tensor out(t.dtype(), shape, t.origin());
  const size_t elem = t.is_int() ? sizeof(int64_t) : sizeof(float);
  const auto* src = static_cast<const std::byte*>(t.is_int() ? static_cast<const void*>(t.i64())
                                                             : static_cast<const void*>(t.f32()));
  auto* dst = static_cast<std::byte*>(out.is_int() ? static_cast<void*>(out.i64())
                                                   : static_cast<void*>(out.f32()));
  const size_t run = static_cast<size_t>(c * inner) * elem;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < chunks; ++j) {
      // Chunk j of the zigzag order holds the chunk of the sequence at its first position.
      const int64_t from = zigzag_position(j * c, n, chunks);
      const int64_t s = back ? j * c : from, d = back ? from : j * c;
      std::memcpy(dst + static_cast<size_t>((o * n + d) * inner) * elem,
                  src + static_cast<size_t>((o * n + s) * inner) * elem, run);
    }
  return out;
}

void permute_sequences(TensorMap& m, const SequenceLayout& layout, bool back) {
  if (layout.in_order()) return;
  for (const auto& [v, dims] : layout.dims) {
    auto it = m.find(v);
    if (it == m.end()) continue;
    for (int64_t d : dims) it->second = permute_sequence(it->second, d, layout.chunks, back);
  }
}

}  // namespace heddle
