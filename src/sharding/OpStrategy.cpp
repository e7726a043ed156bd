#include "heddle/sharding/OpStrategy.h"

#include <algorithm>
#include <numeric>

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

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

// Judges one shard from its span: a result must write exactly its block (or nothing, when its
// block is empty); an input may read any range, and `below`/`above` rise to the number of elements
// it reads below and above its own block (its halo: fetched from whichever devices own them).
// `shard` names the shard for a diagnostic.
template <typename Name>
Status check_shard(const ShardSpan& sp, bool is_result, int64_t dim, const Name& shard,
                   int64_t& below, int64_t& above) {
  auto range = [](int64_t lo, int64_t hi) {
    return "[" + std::to_string(lo) + ":" + std::to_string(hi) + "]";
  };
  if (is_result) {
    bool both_empty = sp.hi <= sp.lo && sp.own_hi <= sp.own_lo;
    if (!both_empty && (sp.lo != sp.own_lo || sp.hi != sp.own_hi))
      return Diagnostic(shard() + "writes " + range(sp.lo, sp.hi) + " of tensor dim " +
                        std::to_string(dim) + " but its block is " + range(sp.own_lo, sp.own_hi));
    return {};
  }
  if (sp.hi <= sp.lo) return {};  // reads nothing (all padding)
  below = std::max(below, std::min(sp.own_lo, sp.hi) - sp.lo);
  above = std::max(above, sp.hi - std::max(sp.own_hi, sp.lo));
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
  auto named = [&](int64_t k) {
    return [&s, k] {
      return "shard " + std::to_string(k) + " of index dim " + s.space.dim(s.index).name + " ";
    };
  };
  if (check == ShardCheck::kEvery) {
    for (int64_t k = 0; k < s.n; ++k)
      HEDDLE_TRY(check_shard(boxed_span(s, k), is_result, s.dim, named(k), below, above));
    return {};
  }
  SpanRow span(s);
  std::vector<int64_t> shards = deciding_shards(s, span);
  if (shards.empty()) {  // every shard in turn
    shards.resize(static_cast<size_t>(s.n));
    std::iota(shards.begin(), shards.end(), 0);
  }
  for (int64_t k : shards)
    HEDDLE_TRY(check_shard(span(k), is_result, s.dim, named(k), below, above));
  return {};
}

// Tensor dim `dim` of an operand placed by `placed` when several index dims split by the strategy
// reach it (a sum `x(i + j)` with both split, a dim an input's column also reaches elsewhere):
// every combination of coordinates on the mesh axes that decide the dim's read and block, checked
// with boxes. Their number is at most the mesh's devices.
Status check_devices(const Op& op, const Operand& o, const TensorType& t, const Mesh& mesh,
                     const OpStrategy& s, const TensorSharding& placed, int64_t dim, bool is_result,
                     int64_t& below, int64_t& above) {
  const AffineMap& m = o.proj.map();
  std::vector<int64_t> axes;  // the deciding axes
  for (int64_t a = 0; a < mesh.rank(); ++a) {
    bool shards_dim = placed.at(a).is_shard() && placed.at(a).dim() == dim;
    bool reads_dim = s.dim(a) >= 0 && m.at(dim, s.dim(a)) != 0;
    if (shards_dim || reads_dim) axes.push_back(a);
  }
  std::vector<int64_t> coords(static_cast<size_t>(mesh.rank()), 0);
  const int64_t extent = t.shape()[dim];
  while (true) {
    int64_t device = mesh.device(IVec(coords));
    Box need = o.proj.image(s.local_index_box(op.space, mesh, device));
    Box own = placed.local_box(t.shape(), mesh, device);
    ShardSpan sp{std::max<int64_t>(need.start()[dim], 0),
                 std::min<int64_t>(need.end()[dim], extent), own.start()[dim], own.end()[dim]};
    if (need.empty()) sp.hi = sp.lo;
    auto named = [&] { return "device " + std::to_string(device) + " "; };
    HEDDLE_TRY(check_shard(sp, is_result, dim, named, below, above));
    size_t k = axes.size();
    while (k > 0 && ++coords[axes[k - 1]] == mesh.size(axes[k - 1])) coords[axes[--k]] = 0;
    if (k == 0) return {};
  }
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

Result<Placement> split_placement(const IndexProjection& proj, const IndexSpace& space, int64_t i,
                                  bool is_result) {
  HEDDLE_ASSERT(i >= 0 && i < space.rank()) << "index dim " << i << " of " << space.rank();
  const AffineMap& m = proj.map();
  int64_t row = -1;
  for (int64_t r = 0; r < m.out_rank(); ++r) {
    if (m.at(r, i) == 0) continue;
    if (row >= 0 && is_result)
      return Diagnostic("index dim " + space.dim(i).name + " reaches tensor dims " +
                        std::to_string(row) + " and " + std::to_string(r) +
                        " of the result, which one block cannot hold");
    if (row < 0) row = r;
  }
  if (row >= 0) return Placement::shard(row);
  if (!is_result) return Placement::replicate();
  const IndexDim& d = space.dim(i);
  if (!d.reduce) return Diagnostic("parallel dim " + d.name + " does not reach the result");
  return Placement::partial(*d.reduce);
}

Result<StrategyPlacements> derive_placements(const Graph& g, OpId id, const Mesh& mesh,
                                             const OpStrategy& s, ShardCheck check) {
  const Op& op = g.op(id);
  HEDDLE_ASSERT(s.rank() == mesh.rank()) << "strategy for another mesh";
  auto who = [&] {  // built only for a diagnostic: enumerating strategies makes many
    return "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
           value_ref(g.value(op.results.at(0).value).name);
  };
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (s.dim(a) >= op.space.rank())
      return Diagnostic(who() + ": strategy names index dim " + std::to_string(s.dim(a)) +
                        " but the op has " + std::to_string(op.space.rank()));
  // A split reduce dim leaves every device a partial result of the whole block, so every device
  // needs a nonempty part of it (uneven blocks may leave trailing devices none).
  for (int64_t i = 0; i < op.space.rank(); ++i) {
    const IndexDim& d = op.space.dim(i);
    int64_t n = 1;
    for (int64_t a = 0; a < mesh.rank(); ++a)
      if (s.dim(a) == i) n *= mesh.size(a);
    if (n > 1 && d.reduce && (n - 1) * ((d.extent + n - 1) / n) >= d.extent)
      return Diagnostic(who() + ": splitting reduce dim " + d.name + "=" +
                        std::to_string(d.extent) + " " + std::to_string(n) +
                        " ways leaves some devices no part of it, and each must hold a partial " +
                        "result");
  }

  auto one = [&](const Operand& o, bool is_result, size_t k) -> Result<OperandSharding> {
    const TensorType& t = g.type(o.value);
    auto what = [&] {
      return who() + ": " + (is_result ? "result " : "input ") + std::to_string(k) + " (" +
             value_ref(g.value(o.value).name) + ")";
    };
    std::vector<Placement> per_axis(static_cast<size_t>(mesh.rank()));
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      if (s.dim(a) < 0) continue;
      auto p = split_placement(o.proj, op.space, s.dim(a), is_result);
      if (!p.ok())
        return Diagnostic(what() + ": cannot split index dim " + op.space.dim(s.dim(a)).name +
                          " because " + p.error().message);
      per_axis[a] = *p;
    }
    OperandSharding os{TensorSharding(per_axis), IVec::zeros(t.rank()), IVec::zeros(t.rank())};
    if (!os.sharding.blocks_nest(t.shape(), mesh))
      return Diagnostic(what() + ": the blocks of " + t.to_string() + " under " +
                        os.sharding.to_string() + " on mesh " + mesh.to_string() +
                        " do not nest (a tensor dim cut by several axes unevenly)");
    // Alignment: per tensor dim, every block's needed range vs its own block.
    const AffineMap& m = o.proj.map();
    for (int64_t d = 0; d < t.rank(); ++d) {
      std::vector<int64_t> axes = os.sharding.axes_sharding(d);
      if (axes.empty()) continue;
      // One index dim alone decides the read of dim d: shards of one index dim, SpanRow's case.
      int64_t i = s.dim(axes.front());
      bool alone = true;
      for (int64_t a = 0; a < mesh.rank(); ++a)
        if (s.dim(a) >= 0 && s.dim(a) != i && m.at(d, s.dim(a)) != 0) alone = false;
      int64_t below = 0, above = 0;
      Status checked;
      if (alone) {
        DimSplit split{o.proj, op.space, i, os.sharding.shards_of_dim(d, mesh), d, t.shape()[d]};
        checked = check_shards(split, is_result, check, below, above);
      } else {
        checked = check_devices(op, o, t, mesh, s, os.sharding, d, is_result, below, above);
      }
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
