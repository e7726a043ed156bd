#include "heddle/sharding/OpStrategy.h"

#include <algorithm>
#include <numeric>

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

// How index dim `i` reaches one operand: the row it lands in (or -1 for none), or invalid.
struct Reach {
  bool valid = true;
  int64_t row = -1;
  std::string why;
};

Reach reach(const IndexProjection& proj, const IndexSpace& space, int64_t i) {
  const AffineMap& m = proj.map();
  Reach r;
  for (int64_t row = 0; row < m.out_rank(); ++row) {
    if (m.at(row, i) == 0) continue;
    if (r.row >= 0) return {false, -1, "it reaches several tensor dims"};
    r.row = row;
  }
  if (r.row < 0) return r;
  // i must be alone in its row or its most major dim: |A_ri| equals the span of the others.
  int64_t coef = std::abs(m.at(r.row, i)), others = 0;
  bool alone = true;
  for (int64_t c = 0; c < m.in_rank(); ++c) {
    if (c == i || m.at(r.row, c) == 0 || space.dim(c).extent <= 1) continue;
    alone = false;
    others += std::abs(m.at(r.row, c)) * (space.dim(c).extent - 1);
  }
  if (!alone && coef != others + proj.window()[r.row])
    return {false, -1,
            "it is not the most major dim of tensor dim " + std::to_string(r.row) +
                ", so its shards would be strided"};
  return r;
}

// One sharded tensor dim of an operand: tensor dim `dim` (of `extent`) cut into `n` blocks, block
// k computed by part k of index dim `index` split n ways.
struct DimSplit {
  const IndexProjection& proj;
  const IndexSpace& space;
  int64_t index, n, dim, extent;
};

// What shard `k` touches of the tensor dim (clipped to the tensor) and its own block.
struct ShardSpan {
  int64_t lo, hi, own_lo, own_hi;
};

// Shard k's span the straightforward way: its index box, that box's image, its block.
ShardSpan boxed_span(const DimSplit& s, int64_t k) {
  Box need = s.proj.image(s.space.box().split_part(s.index, s.n, k));
  Box own = block_of(s.extent, s.n, k);
  return {std::max<int64_t>(need.start()[s.dim], 0), std::min<int64_t>(need.end()[s.dim], s.extent),
          own.start()[0], own.end()[0]};
}

// The same spans computed without boxes: the image's row `dim` summed once over the index dims
// that every shard spans whole, then per shard only the split dim's term (as AffineMap::image and
// Box::split_part compute them).
class SpanRow {
 public:
  explicit SpanRow(const DimSplit& s) : s_(s) {
    const AffineMap& m = s.proj.map();
    lo_ = hi_ = m.offset()[s.dim];
    for (int64_t c = 0; c < m.in_rank(); ++c) {
      int64_t e = s.space.dim(c).extent;
      if (e == 0) empty_ = true;
      if (c == s.index) continue;
      int64_t x = 0, y = m.at(s.dim, c) * (e - 1);
      lo_ += std::min(x, y);
      hi_ += std::max(x, y);
    }
    hi_ += s.proj.window()[s.dim];  // + 1 for the half-open end, + window - 1
    a_ = m.at(s.dim, s.index);
    extent_i_ = s.space.dim(s.index).extent;
    chunk_i_ = (extent_i_ + s.n - 1) / s.n;
    chunk_t_ = (s.extent + s.n - 1) / s.n;
  }

  // True when some index dim has extent 0 (every shard's image is then empty).
  bool empty() const { return empty_; }

  // Shard k's read of the tensor dim before clipping: [lo, hi).
  std::pair<int64_t, int64_t> unclipped(int64_t k) const {
    int64_t start = std::min(k * chunk_i_, extent_i_), end = std::min(start + chunk_i_, extent_i_);
    if (empty_ || start == end) {  // an empty box's image: [offset, offset)
      int64_t off = s_.proj.map().offset()[s_.dim];
      return {off, off};
    }
    int64_t x = a_ * start, y = a_ * (end - 1);
    return {lo_ + std::min(x, y), hi_ + std::max(x, y)};
  }

  ShardSpan operator()(int64_t k) const {
    auto [lo, hi] = unclipped(k);
    int64_t own_lo = std::min(k * chunk_t_, s_.extent);
    return {std::max<int64_t>(lo, 0), std::min<int64_t>(hi, s_.extent), own_lo,
            std::min(own_lo + chunk_t_, s_.extent)};
  }

 private:
  const DimSplit& s_;
  int64_t lo_ = 0, hi_ = 0, a_ = 0, extent_i_ = 0, chunk_i_ = 0, chunk_t_ = 0;
  bool empty_ = false;
};

// Judges shard `k` from its span: a result must write exactly its block; an input may read
// beyond its block by less than a block on each side (raising `below`/`above`, the halo, to what
// it reads).
Status check_shard(const DimSplit& s, const ShardSpan& sp, bool is_result, int64_t k,
                   int64_t& below, int64_t& above) {
  int64_t block = sp.own_hi - sp.own_lo;
  auto range = [](int64_t lo, int64_t hi) {
    return "[" + std::to_string(lo) + ":" + std::to_string(hi) + "]";
  };
  auto shard = [&] {
    return "shard " + std::to_string(k) + " of index dim " + s.space.dim(s.index).name + " ";
  };
  if (is_result) {
    if (sp.lo != sp.own_lo || sp.hi != sp.own_hi)
      return Diagnostic(shard() + "writes " + range(sp.lo, sp.hi) + " of tensor dim " +
                        std::to_string(s.dim) + " but its block is " + range(sp.own_lo, sp.own_hi));
    return {};
  }
  if (sp.hi <= sp.lo) return {};  // reads nothing (all padding)
  int64_t b = std::max<int64_t>(sp.own_lo - sp.lo, 0), a = std::max<int64_t>(sp.hi - sp.own_hi, 0);
  if (sp.hi <= sp.own_lo || sp.lo >= sp.own_hi || b >= block || a >= block)
    return Diagnostic(shard() + "reads " + range(sp.lo, sp.hi) + " of tensor dim " +
                      std::to_string(s.dim) + ", beyond its block " + range(sp.own_lo, sp.own_hi) +
                      " and its neighbours'");
  below = std::max(below, b);
  above = std::max(above, a);
  return {};
}

// floor(p / q) for q != 0.
int64_t floor_div(int64_t p, int64_t q) {
  int64_t r = p / q;
  return (p % q != 0 && ((p < 0) != (q < 0))) ? r - 1 : r;
}

// The shards whose checks decide the outcome of checking all n, in increasing order; empty when
// the shortcut does not apply (then every shard must be checked).
//
// When the index extent splits evenly, shard k's unclipped read is [lo0 + v k, hi0 + v k) (v: the
// projection's coefficient times the index block) and its block [b k, b k + b): every quantity
// check_shard() compares is a clamp (max/min) of affine functions of k from a small family F.
// Between two consecutive integer roots of the functions of F nothing switches: each quantity is
// affine in k there, each comparison keeps its outcome, and a maximum over the run is at its
// ends. So the first failing shard, and the largest halo, are found among shards 0 and n - 1 and
// the integers next to every root of F: shards that differ from their neighbours only by an
// offset (the interior ones, for a uniform split) are not visited one by one.
std::vector<int64_t> deciding_shards(const DimSplit& s, const SpanRow& span) {
  std::vector<int64_t> out;
  if (span.empty() || s.space.dim(s.index).extent % s.n != 0) return out;
  auto [lo0, hi0] = span.unclipped(0);
  int64_t v = s.proj.map().at(s.dim, s.index) * (s.space.dim(s.index).extent / s.n);
  int64_t b = s.extent / s.n;
  struct Affine {  // p + q k
    int64_t p, q;
    Affine operator-(const Affine& o) const { return {p - o.p, q - o.q}; }
  };
  const Affine lo_raw{lo0, v}, hi_raw{hi0, v}, zero{0, 0}, ext{s.extent, 0}, own_lo{0, b},
      own_hi{b, b}, block{b, 0};
  std::vector<Affine> f = {lo_raw, hi_raw - ext};
  for (const Affine& lo : {lo_raw, zero})
    for (const Affine& hi : {hi_raw, ext})
      for (const Affine& x : {hi - lo, own_lo - hi, lo - own_hi, own_lo - lo, own_lo - lo - block,
                              hi - own_hi, hi - own_hi - block})
        f.push_back(x);
  out = {0, s.n - 1};
  for (const Affine& x : f) {
    if (x.q == 0) continue;
    int64_t r = floor_div(-x.p, x.q);  // the root lies in [r, r + 1]
    for (int64_t k : {r, r + 1})
      if (k >= 0 && k < s.n) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (static_cast<int64_t>(out.size()) >= s.n) out.clear();  // no shortcut: visit them all
  return out;
}

// Checks the shards of one sharded tensor dim; the first failing shard is the diagnostic.
// kEvery: every shard, by boxes (the oracle); kDeciding: the deciding shards (or every shard when
// there is no shortcut), by SpanRow.
Status check_shards(const DimSplit& s, bool is_result, ShardCheck check, int64_t& below,
                    int64_t& above) {
  if (check == ShardCheck::kEvery) {
    for (int64_t k = 0; k < s.n; ++k)
      HEDDLE_TRY(check_shard(s, boxed_span(s, k), is_result, k, below, above));
    return {};
  }
  SpanRow span(s);
  std::vector<int64_t> shards = deciding_shards(s, span);
  if (shards.empty()) {  // every shard in turn
    shards.resize(static_cast<size_t>(s.n));
    std::iota(shards.begin(), shards.end(), 0);
  }
  for (int64_t k : shards) HEDDLE_TRY(check_shard(s, span(k), is_result, k, below, above));
  return {};
}

}  // namespace

Box OpStrategy::local_index_box(const IndexSpace& space, const Mesh& mesh, int64_t device) const {
  HEDDLE_ASSERT(mesh.rank() == rank()) << "strategy rank " << rank() << " vs " << mesh.to_string();
  // Instantiating programs calls this for every kernel of every device: no boxes per dim.
  IVec c = mesh.coords(device);
  std::vector<int64_t> s(static_cast<size_t>(space.rank()), 0), e;
  e.reserve(static_cast<size_t>(space.rank()));
  for (const IndexDim& d : space.dims()) e.push_back(d.extent);
  for (int64_t i = 0; i < space.rank(); ++i) {
    int64_t n = 1, k = 0;
    for (int64_t a = 0; a < rank(); ++a)
      if (dims_[a] == i) {
        n *= mesh.size(a);
        k = k * mesh.size(a) + c[a];
      }
    if (n == 1) continue;
    int64_t extent = e[i], chunk = (extent + n - 1) / n;  // as Box::split_part(i, n, k)
    s[i] = std::min(k * chunk, extent);
    e[i] = std::min(s[i] + chunk, extent);
  }
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

std::string OpStrategy::to_string(const IndexSpace& space, const Mesh& mesh) const {
  std::vector<std::string> parts;
  for (int64_t a = 0; a < rank(); ++a)
    parts.push_back(mesh.axis(a).name + ": " +
                    (dims_[a] < 0 ? std::string("-") : space.dim(dims_[a]).name));
  return "{" + join(parts, ", ") + "}";
}

Result<StrategyPlacements> derive_placements(const Graph& g, OpId id, const Mesh& mesh,
                                             const OpStrategy& s, ShardCheck check) {
  const Op& op = g.op(id);
  HEDDLE_ASSERT(s.rank() == mesh.rank()) << "strategy for another mesh";
  auto who = [&] {  // built only for a diagnostic: enumerating strategies makes many
    return "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
           value_ref(g.value(op.results.at(0).value).name);
  };
  // Divisibility of index extents by the axes that split them.
  for (int64_t i = 0; i < op.space.rank(); ++i) {
    int64_t n = 1;
    std::vector<std::string> axes;
    for (int64_t a = 0; a < mesh.rank(); ++a)
      if (s.dim(a) == i) {
        n *= mesh.size(a);
        axes.push_back(mesh.axis(a).name);
      }
    const IndexDim& d = op.space.dim(i);
    if (n > 1 && d.extent % n != 0)
      return Diagnostic(who() + ": mesh axes " + join(axes, ",") + " (" + std::to_string(n) +
                        " devices) do not divide index dim " + d.name + "=" +
                        std::to_string(d.extent) + "; divisors of " + std::to_string(d.extent) +
                        ": " + divisors_text(d.extent));
  }
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (s.dim(a) >= op.space.rank())
      return Diagnostic(who() + ": strategy names index dim " + std::to_string(s.dim(a)) +
                        " but the op has " + std::to_string(op.space.rank()));

  auto one = [&](const Operand& o, bool is_result, size_t k) -> Result<OperandSharding> {
    const TensorType& t = g.type(o.value);
    auto what = [&] {
      return who() + ": " + (is_result ? "result " : "input ") + std::to_string(k) + " (" +
             value_ref(g.value(o.value).name) + ")";
    };
    std::vector<Placement> per_axis(static_cast<size_t>(mesh.rank()));
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      int64_t i = s.dim(a);
      if (i < 0) continue;
      Reach r = reach(o.proj, op.space, i);
      if (!r.valid)
        return Diagnostic(what() + ": cannot split index dim " + op.space.dim(i).name +
                          " because " + r.why);
      if (r.row >= 0) {
        per_axis[a] = Placement::shard(r.row);
      } else if (is_result) {
        const IndexDim& d = op.space.dim(i);
        if (!d.reduce)
          return Diagnostic(what() + ": parallel dim " + d.name + " does not reach the result");
        per_axis[a] = Placement::partial(*d.reduce);
      }
    }
    OperandSharding os{TensorSharding(per_axis), IVec::zeros(t.rank()), IVec::zeros(t.rank())};
    // Alignment: per tensor dim, every block's needed range vs its own block.
    for (int64_t d = 0; d < t.rank(); ++d) {
      std::vector<int64_t> axes = os.sharding.axes_sharding(d);
      if (axes.empty()) continue;
      int64_t n = os.sharding.shards_of_dim(d, mesh);
      int64_t extent = t.shape()[d];
      if (extent % n != 0)
        return Diagnostic(what() + ": " + std::to_string(n) + " shards do not divide tensor dim " +
                          std::to_string(d) + " of " + t.to_string() + "; divisors of " +
                          std::to_string(extent) + ": " + divisors_text(extent));
      DimSplit split{o.proj, op.space, s.dim(axes.front()), n, d, extent};
      int64_t below = 0, above = 0;
      auto checked = check_shards(split, is_result, check, below, above);
      if (!checked.ok()) return Diagnostic(what() + ": " + checked.error().message);
      os.halo_lo = os.halo_lo.with(d, below);
      os.halo_hi = os.halo_hi.with(d, above);
    }
    return os;
  };

  StrategyPlacements out;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    auto r = one(op.inputs[k], false, k);
    HEDDLE_TRY(r);
    out.inputs.push_back(std::move(*r));
  }
  for (size_t k = 0; k < op.results.size(); ++k) {
    auto r = one(op.results[k], true, k);
    HEDDLE_TRY(r);
    out.results.push_back(std::move(*r));
  }
  return out;
}

std::vector<OpStrategy> enumerate_strategies(const Graph& g, OpId id, const Mesh& mesh,
                                             ShardCheck check) {
  const Op& op = g.op(id);
  std::vector<OpStrategy> out;
  std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
  // Odometer over (none, 0, ..., rank-1) per axis; -1 first so replicated comes first.
  while (true) {
    bool canonical = true;  // an axis of size 1 splits nothing
    for (int64_t a = 0; a < mesh.rank(); ++a)
      if (dims[a] >= 0 && mesh.size(a) == 1) canonical = false;
    OpStrategy s(dims);
    if (canonical && derive_placements(g, id, mesh, s, check).ok()) out.push_back(s);
    int64_t a = mesh.rank() - 1;
    while (a >= 0) {
      if (++dims[a] < op.space.rank()) break;
      dims[a] = -1;
      --a;
    }
    if (a < 0) break;
  }
  return out;
}

}  // namespace heddle
