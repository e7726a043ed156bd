#include "heddle/sharding/OpStrategy.h"

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

std::string divisors(int64_t n) {
  std::vector<std::string> d;
  for (int64_t k = 1; k <= n && d.size() < 16; ++k)
    if (n % k == 0) d.push_back(std::to_string(k));
  return join(d, ", ");
}

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

}  // namespace

Box OpStrategy::local_index_box(const IndexSpace& space, const Mesh& mesh, int64_t device) const {
  HEDDLE_ASSERT(mesh.rank() == rank()) << "strategy rank " << rank() << " vs " << mesh.to_string();
  IVec c = mesh.coords(device);
  Box box = space.box();
  for (int64_t i = 0; i < space.rank(); ++i) {
    int64_t n = 1, k = 0;
    for (int64_t a = 0; a < rank(); ++a)
      if (dims_[a] == i) {
        n *= mesh.size(a);
        k = k * mesh.size(a) + c[a];
      }
    if (n > 1) box = box.split_part(i, n, k);
  }
  return box;
}

std::string OpStrategy::to_string(const IndexSpace& space, const Mesh& mesh) const {
  std::vector<std::string> parts;
  for (int64_t a = 0; a < rank(); ++a)
    parts.push_back(mesh.axis(a).name + ": " +
                    (dims_[a] < 0 ? std::string("-") : space.dim(dims_[a]).name));
  return "{" + join(parts, ", ") + "}";
}

Result<StrategyPlacements> derive_placements(const Graph& g, OpId id, const Mesh& mesh,
                                             const OpStrategy& s) {
  const Op& op = g.op(id);
  HEDDLE_ASSERT(s.rank() == mesh.rank()) << "strategy for another mesh";
  std::string who = "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
                    value_ref(g.value(op.results.at(0).value).name);
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
      return Diagnostic(who + ": mesh axes " + join(axes, ",") + " (" + std::to_string(n) +
                        " devices) do not divide index dim " + d.name + "=" +
                        std::to_string(d.extent) + "; divisors of " + std::to_string(d.extent) +
                        ": " + divisors(d.extent));
  }
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (s.dim(a) >= op.space.rank())
      return Diagnostic(who + ": strategy names index dim " + std::to_string(s.dim(a)) +
                        " but the op has " + std::to_string(op.space.rank()));

  auto one = [&](const Operand& o, bool is_result, size_t k) -> Result<OperandSharding> {
    const TensorType& t = g.type(o.value);
    std::string what = who + ": " + (is_result ? "result " : "input ") + std::to_string(k) + " (" +
                       value_ref(g.value(o.value).name) + ")";
    std::vector<Placement> per_axis(static_cast<size_t>(mesh.rank()));
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      int64_t i = s.dim(a);
      if (i < 0) continue;
      Reach r = reach(o.proj, op.space, i);
      if (!r.valid)
        return Diagnostic(what + ": cannot split index dim " + op.space.dim(i).name + " because " +
                          r.why);
      if (r.row >= 0) {
        per_axis[a] = Placement::shard(r.row);
      } else if (is_result) {
        const IndexDim& d = op.space.dim(i);
        if (!d.reduce)
          return Diagnostic(what + ": parallel dim " + d.name + " does not reach the result");
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
        return Diagnostic(what + ": " + std::to_string(n) + " shards do not divide tensor dim " +
                          std::to_string(d) + " of " + t.to_string() + "; divisors of " +
                          std::to_string(extent) + ": " + divisors(extent));
      int64_t i = s.dim(axes.front());
      for (int64_t k = 0; k < n; ++k) {
        Box idx = op.space.box().split_part(i, n, k);
        Box need = o.proj.image(idx);
        int64_t lo = std::max<int64_t>(need.start()[d], 0);
        int64_t hi = std::min<int64_t>(need.end()[d], extent);
        Box own = block_of(extent, n, k);
        int64_t os_ = own.start()[0], oe = own.end()[0], block = oe - os_;
        if (is_result) {
          if (lo != os_ || hi != oe)
            return Diagnostic(what + ": shard " + std::to_string(k) + " of index dim " +
                              op.space.dim(i).name + " writes [" + std::to_string(lo) + ":" +
                              std::to_string(hi) + "] of tensor dim " + std::to_string(d) +
                              " but its block is [" + std::to_string(os_) + ":" +
                              std::to_string(oe) + "]");
          continue;
        }
        if (hi <= lo) continue;  // reads nothing (all padding)
        int64_t below = std::max<int64_t>(os_ - lo, 0), above = std::max<int64_t>(hi - oe, 0);
        if (hi <= os_ || lo >= oe || below >= block || above >= block)
          return Diagnostic(what + ": shard " + std::to_string(k) + " of index dim " +
                            op.space.dim(i).name + " reads [" + std::to_string(lo) + ":" +
                            std::to_string(hi) + "] of tensor dim " + std::to_string(d) +
                            ", beyond its block [" + std::to_string(os_) + ":" +
                            std::to_string(oe) + "] and its neighbours'");
        os.halo_lo = os.halo_lo.with(d, std::max(os.halo_lo[d], below));
        os.halo_hi = os.halo_hi.with(d, std::max(os.halo_hi[d], above));
      }
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

std::vector<OpStrategy> enumerate_strategies(const Graph& g, OpId id, const Mesh& mesh) {
  const Op& op = g.op(id);
  std::vector<OpStrategy> out;
  std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
  // Odometer over (none, 0, ..., rank-1) per axis; -1 first so replicated comes first.
  while (true) {
    bool canonical = true;  // an axis of size 1 splits nothing
    for (int64_t a = 0; a < mesh.rank(); ++a)
      if (dims[a] >= 0 && mesh.size(a) == 1) canonical = false;
    OpStrategy s(dims);
    if (canonical && derive_placements(g, id, mesh, s).ok()) out.push_back(s);
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
