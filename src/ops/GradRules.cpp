// Gradient rules. Most are generic over index spaces: the gradient for an input is an op over the
// forward op's own index space in which the dims that input's projection uses are parallel and
// the others reduce(sum), writing through the input's projection (broadcast operands thus get
// their sums for free). Windowed ops with overlapping windows (conv, pooling) and offset
// projections (slice, concat) get their own signatures.
#include "GradRules.h"

#include <array>
#include <cmath>

#include "OpsUtil.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ir/WindowGeometry.h"

namespace heddle::grad_detail {

using namespace ops_detail;

namespace {

bool uses(const IndexProjection& p, int64_t dim) {
  for (int64_t r = 0; r < p.tensor_rank(); ++r)
    if (p.map().at(r, dim) != 0) return true;
  return false;
}

// An op over fwd's index space writing `target`'s value shape through target's projection. When
// that projection reads a box of the tensor rather than all of it (`%x(i - 1, j) padded`,
// `%x(i + 1, j)` over fewer rows), the op writes the box and a padded one-input concat places it
// in zeros of the tensor's shape, as slice's gradient does; a projection that reads no box exactly
// once (strides with gaps, overlapping windows) has no gradient here: a diagnostic.
ValueId space_op(Ops& ops, const Op& fwd, OpKind kind, Attrs attrs, std::vector<Operand> ins,
                 const Operand& target) {
  if (!ops.ok()) return kNoValue;
  std::vector<IndexDim> dims = fwd.space.dims();
  std::vector<bool> reduce;
  for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k) {
    dims[k].reduce = uses(target.proj, k) ? std::nullopt : std::optional<Monoid>(Monoid::kSum);
    reduce.push_back(dims[k].reduce.has_value());
  }
  Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.space = IndexSpace(std::move(dims));
  op.inputs = std::move(ins);
  op.results = {{-1, target.proj, false}};
  const IVec shape = ops.shape(target.value);  // a copy: emit appends to the graph
  if (check_exact_cover(target.proj, op.space.extents(), reduce, shape).ok()) {
    auto r = ops.emit(std::move(op), {TensorType(DType::kF32, shape)});
    return r.empty() ? kNoValue : r[0];
  }
  const Box box = target.proj.image(op.space.box());
  const int64_t rank = shape.size();
  const AffineMap& m = target.proj.map();
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(rank));
  std::vector<int64_t> back, into;
  for (int64_t d = 0; d < rank; ++d) {
    for (int64_t k = 0; k < m.in_rank(); ++k) rows[static_cast<size_t>(d)].push_back(m.at(d, k));
    back.push_back(m.offset()[d] - box.start()[d]);
    into.push_back(-box.start()[d]);
  }
  IndexProjection local(AffineMap::from_rows(m.in_rank(), rows, IVec(back)), target.proj.window());
  if (!check_exact_cover(local, op.space.extents(), reduce, box.shape()).ok()) {
    ops.fail("autodiff: no gradient rule for op '" + std::string(op_kind_name(fwd.kind)) +
             "' in this form: it reads " + value_ref(ops.graph().value(target.value).name) +
             " through " + target.proj.to_string(fwd.space.names()) +
             ", which does not read a box of it exactly once; the forms that train read each "
             "element of a box (or the whole tensor) from one index point, e.g. (i - 1, j) or "
             "(2*j + k)");
    return kNoValue;
  }
  op.results = {{-1, local, false}};
  auto part = ops.emit(std::move(op), {TensorType(DType::kF32, box.shape())});
  if (part.empty()) return kNoValue;
  Op place;
  place.kind = OpKind::kConcat;
  place.attrs = {{"axis", int64_t{0}}};
  place.space = make_space(dim_names(rank), shape.values());
  place.inputs = {{part[0], shifted_identity(rank, into), true}};
  place.results = {{-1, identity_proj(rank), false}};
  auto r = ops.emit(std::move(place), {TensorType(DType::kF32, shape)});
  return r.empty() ? kNoValue : r[0];
}

Operand with_value(const Operand& o, ValueId v) { return {v, o.proj, o.padded}; }

// `fwd` with input `i`'s window unrolled: each row r with window w > 1 gets a new reduce(sum) index
// dim `win<r>` of extent w added to it, and window 1. Reads the same elements per result point.
Op unroll_windows(const Op& fwd, size_t i) {
  const IndexProjection& p = fwd.inputs[i].proj;
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < p.tensor_rank(); ++r)
    if (p.window()[r] > 1) rows.push_back(r);
  if (rows.empty()) return fwd;
  std::vector<IndexDim> dims = fwd.space.dims();
  for (int64_t r : rows) dims.push_back({"win" + std::to_string(r), p.window()[r], Monoid::kSum});
  auto in = static_cast<int64_t>(dims.size()), old = fwd.space.rank();
  auto widen = [&](const IndexProjection& q, bool add_rows) {
    std::vector<std::vector<int64_t>> m;
    std::vector<int64_t> win;
    for (int64_t r = 0; r < q.tensor_rank(); ++r) {
      std::vector<int64_t> row(static_cast<size_t>(in), 0);
      for (int64_t k = 0; k < old; ++k) row[k] = q.map().at(r, k);
      for (size_t j = 0; j < rows.size() && add_rows; ++j)
        if (rows[j] == r) row[old + static_cast<int64_t>(j)] = 1;
      m.push_back(std::move(row));
      win.push_back(add_rows ? 1 : q.window()[r]);
    }
    return make_proj(in, m, q.map().offset().values(), win);
  };
  Op out = fwd;
  out.space = IndexSpace(std::move(dims));
  for (size_t k = 0; k < out.inputs.size(); ++k)
    out.inputs[k].proj = widen(fwd.inputs[k].proj, k == i);
  for (auto& r : out.results) r.proj = widen(r.proj, false);
  return out;
}

// Letters for an einsum over fwd's dims, from the projection rows.
Result<std::string> letters(const Op& fwd, const IndexProjection& p) {
  std::string s;
  for (int64_t r = 0; r < p.tensor_rank(); ++r) {
    int64_t dim = -1;
    for (int64_t k = 0; k < p.index_rank(); ++k)
      if (p.map().at(r, k) != 0) {
        if (dim >= 0 || p.map().at(r, k) != 1) dim = -2;
        if (dim == -1) dim = k;
      }
    if (dim < 0 || p.map().offset()[r] != 0 || p.window()[r] != 1 || fwd.space.rank() > 26)
      return Diagnostic("autodiff: einsum operand projection " + p.to_string() +
                        " is not a plain selection of index dims; write each operand of a "
                        "two-operand einsum as one index dim per tensor dim, e.g. %a(m, k)");
    s += static_cast<char>('a' + dim);
  }
  return s;
}

// The index dim that row `row` of `p` steps by coefficient `coef` (-1: none).
int64_t dim_with(const IndexProjection& p, int64_t row, int64_t coef) {
  for (int64_t k = 0; k < p.index_rank(); ++k)
    if (p.map().at(row, k) == coef) return k;
  return -1;
}

// conv2d (the gradients `wanted` of (x, w, bias)): weight gradient over [(g), co, ci, kh, kw,
// n:sum, oh:sum, ow:sum] (an affine product with a padded read of x), input gradient over [n, (g),
// ci, ih, iw, co:sum] and, with a bias, its gradient summed over n, oh and ow. The forward op is
// verified (Verifier: the conv2d form), so its dims are found by role from the result projection
// `(n, g*cog + co, oh, ow)` and the one reduce dim ci, whatever their names; the geometry comes
// from the attributes with their defaults, and the gradient ops spell all of it out.
Result<std::vector<ValueId>> conv_grads(Ops& ops, const Op& fwd, ValueId dy,
                                        const std::vector<bool>& wanted) {
  auto geo = window_geometry(fwd.kind, fwd.attrs);
  HEDDLE_TRY(geo);
  const IndexProjection& yp = fwd.results[0].proj;
  int64_t n_dim = dim_with(yp, 0, 1), co_dim = -1, oh_dim = dim_with(yp, 2, 1),
          ow_dim = dim_with(yp, 3, 1), ci_dim = -1;
  // Row 1 is co, or g*cog + co: co is the coefficient-1 dim the other dim's coefficient counts
  // (with cog = 1 both coefficients are 1 and co is the dim of extent 1).
  for (int64_t k = 0; k < yp.index_rank() && yp.tensor_rank() == 4; ++k) {
    if (yp.map().at(1, k) != 1) continue;
    bool counted = true;
    for (int64_t j = 0; j < yp.index_rank(); ++j)
      if (j != k && yp.map().at(1, j) != 0 && yp.map().at(1, j) != fwd.space.dim(k).extent)
        counted = false;
    if (counted && (co_dim < 0 || fwd.space.dim(k).extent == 1)) co_dim = k;
  }
  for (int64_t k = 0; k < fwd.space.rank(); ++k)
    if (fwd.space.dim(k).reduce) ci_dim = k;
  if (yp.tensor_rank() != 4 || n_dim < 0 || co_dim < 0 || oh_dim < 0 || ow_dim < 0 || ci_dim < 0)
    return Diagnostic(
        "autodiff: conv2d needs the form (n, g*cog + co, oh, ow) with one reduce dim "
        "ci (as Ops::conv2d and the verifier's conv2d rule make it)");
  const int64_t cog = fwd.space.dim(co_dim).extent, cig = fwd.space.dim(ci_dim).extent,
                OH = fwd.space.dim(oh_dim).extent, OW = fwd.space.dim(ow_dim).extent;
  const bool grouped = geo->groups > 1;
  const int64_t G = geo->groups;
  const std::array<int64_t, 2> st = geo->stride, dil = geo->dilation;
  const std::array<int64_t, 4> pad = geo->padding;
  // Copies, not references: the shapes outlive the emits below by construction.
  const IVec xshape = ops.shape(fwd.inputs[0].value), wshape = ops.shape(fwd.inputs[1].value);
  const int64_t KH = wshape[2], KW = wshape[3], N = xshape[0], H = xshape[2], W = xshape[3];
  const Attrs attrs = geo->to_attrs(OpKind::kConv2dGradInput);
  std::vector<ValueId> out(fwd.inputs.size(), kNoValue);
  auto row_of = [](const std::vector<std::string>& names) {
    return [names](std::initializer_list<std::pair<const char*, int64_t>> terms) {
      std::vector<int64_t> r(names.size(), 0);
      for (auto [n, c] : terms)
        for (size_t i = 0; i < names.size(); ++i)
          if (names[i] == n) r[i] = c;
      return r;
    };
  };
  if (wanted[1]) {  // weight
    std::vector<std::string> names = {"co", "ci", "kh", "kw", "n", "oh", "ow"};
    std::vector<int64_t> e = {cog, cig, KH, KW, N, OH, OW};
    std::vector<std::optional<Monoid>> red = {std::nullopt, std::nullopt, std::nullopt,
                                              std::nullopt, Monoid::kSum, Monoid::kSum,
                                              Monoid::kSum};
    if (grouped) {
      names.insert(names.begin(), "g");
      e.insert(e.begin(), G);
      red.insert(red.begin(), std::nullopt);
    }
    auto row = row_of(names);
    int64_t R = static_cast<int64_t>(names.size());
    Op op;
    op.kind = OpKind::kConv2dGradWeight;
    op.attrs = attrs;
    op.space = make_space(names, e, red);
    op.inputs = {
        {fwd.inputs[0].value,
         make_proj(R,
                   {row({{"n", 1}}), row({{"g", cig}, {"ci", 1}}),
                    row({{"oh", st[0]}, {"kh", dil[0]}}), row({{"ow", st[1]}, {"kw", dil[1]}})},
                   {0, 0, -pad[0], -pad[1]}),
         true},
        {dy,
         make_proj(R, {row({{"n", 1}}), row({{"g", cog}, {"co", 1}}), row({{"oh", 1}}),
                       row({{"ow", 1}})}),
         false}};
    op.results = {{-1,
                   make_proj(R, {row({{"g", cog}, {"co", 1}}), row({{"ci", 1}}), row({{"kh", 1}}),
                                 row({{"kw", 1}})}),
                   false}};
    auto r = ops.emit(std::move(op), {TensorType(DType::kF32, wshape)});
    if (!r.empty()) out[1] = r[0];
  }
  if (wanted[0]) {  // input (not for an image fed to the first layer)
    std::vector<std::string> names = {"n", "ci", "ih", "iw", "co"};
    std::vector<int64_t> e = {N, cig, H, W, cog};
    std::vector<std::optional<Monoid>> red = {std::nullopt, std::nullopt, std::nullopt,
                                              std::nullopt, Monoid::kSum};
    if (grouped) {
      names.insert(names.begin() + 1, "g");
      e.insert(e.begin() + 1, G);
      red.insert(red.begin() + 1, std::nullopt);
    }
    auto row = row_of(names);
    int64_t R = static_cast<int64_t>(names.size());
    Op op;
    op.kind = OpKind::kConv2dGradInput;
    op.attrs = attrs;
    op.space = make_space(names, e, red);
    op.inputs = {{dy,
                  make_proj(R, {row({{"n", 1}}), row({{"g", cog}, {"co", 1}}), row({}), row({})},
                            {}, {1, 1, OH, OW}),
                  false},
                 {fwd.inputs[1].value,
                  make_proj(R, {row({{"g", cog}, {"co", 1}}), row({{"ci", 1}}), row({}), row({})},
                            {}, {1, 1, KH, KW}),
                  false}};
    op.results = {{-1,
                   make_proj(R, {row({{"n", 1}}), row({{"g", cig}, {"ci", 1}}), row({{"ih", 1}}),
                                 row({{"iw", 1}})}),
                   false}};
    auto r = ops.emit(std::move(op), {TensorType(DType::kF32, xshape)});
    if (!r.empty()) out[0] = r[0];
  }
  if (fwd.inputs.size() > 2 && wanted[2]) {  // bias: each output point adds it once (at ci = 0)
    Op once = fwd;
    std::vector<IndexDim> dims = fwd.space.dims();
    dims[static_cast<size_t>(ci_dim)].extent = 1;
    once.space = IndexSpace(std::move(dims));
    out[2] = space_op(ops, once, OpKind::kReduceSum, {}, {with_value(fwd.results[0], dy)},
                      fwd.inputs[2]);
  }
  return out;
}

Result<ValueId> pool_grad(Ops& ops, const Op& fwd, ValueId dy) {
  auto geo = window_geometry(fwd.kind, fwd.attrs);
  HEDDLE_TRY(geo);
  const IVec x = ops.shape(fwd.inputs[0].value), y = ops.shape(dy);
  if (x.size() != 4)
    return Diagnostic("autodiff: " + std::string(op_kind_name(fwd.kind)) + " over " +
                      ops.type(fwd.inputs[0].value).to_string() +
                      " has no gradient rule; the form that trains pools NCHW [N, C, H, W] "
                      "(rank 4) over H and W");
  Op op;
  op.kind = OpKind::kPool2dGrad;
  op.attrs = geo->to_attrs(OpKind::kPool2dGrad);
  op.attrs["mode"] = std::string(fwd.kind == OpKind::kMaxPool2d ? "max" : "avg");
  op.space = make_space({"n", "c", "ih", "iw"}, x.values());
  op.inputs = {{dy, select_proj(4, {0, 1, -1, -1}, {1, 1, y[2], y[3]}), false},
               {fwd.inputs[0].value, select_proj(4, {0, 1, -1, -1}, {1, 1, x[2], x[3]}), false}};
  op.results = {{-1, identity_proj(4), false}};
  auto r = ops.emit(std::move(op), {TensorType(DType::kF32, x)});
  return r.empty() ? kNoValue : r[0];
}

}  // namespace

Result<std::vector<ValueId>> op_gradients(Ops& ops, OpId id, ValueId dy,
                                          const std::vector<bool>& wanted) {
  const Op fwd = ops.graph().op(id);  // a copy: emitting ops may move the graph's op list
  const OpKind k = fwd.kind;
  const OpCategory cat = op_kind_info(k).category;
  const Operand& res = fwd.results[0];
  Operand dyo = with_value(res, dy);
  std::vector<ValueId> out(fwd.inputs.size(), kNoValue);
  std::string name(op_kind_name(k));
  auto ins_with_dy = [&]() {
    std::vector<Operand> v = {dyo};
    for (const auto& in : fwd.inputs) v.push_back(in);
    return v;
  };
  // An operand read point to point with the result (same projection and shape, unpadded): where
  // a gradient needs only dy, dy stands in for it.
  auto like_result = [&](const Operand& x) {
    return x.proj == res.proj && !x.padded && ops.shape(x.value) == ops.shape(res.value);
  };
  auto alpha = [&] {
    return fwd.attrs.count("alpha") ? std::get<double>(fwd.attrs.at("alpha")) : 1.0;
  };
  switch (k) {
    case OpKind::kFill:
      return out;
    case OpKind::kCausalMask:
    case OpKind::kScale:
      // dy where the mask shows it, 0 where it hides it; alpha dy. Neither derivative depends on
      // x, so where dy has x's shape and projection it stands in x's place: the scores and the
      // scaled scores then need not live until the backward (4 MiB a GPT layer at batch 8,
      // sequence 128, 4 heads), and the forward's scale and mask run as one pass.
      if (wanted[0]) {
        const Operand& x = fwd.inputs[0];
        std::vector<Operand> ins = ins_with_dy();
        if (like_result(x)) ins[1] = with_value(x, dy);
        Attrs attrs = {{"fn", name}};
        if (k == OpKind::kScale) attrs = {{"fn", name}, {"wrt", int64_t{0}}, {"alpha", alpha()}};
        out[0] = space_op(ops, fwd, OpKind::kElementwiseGrad, attrs, ins, x);
      }
      return out;
    case OpKind::kWhere:
      for (int i : {1, 2})
        if (wanted[i])
          out[i] = space_op(ops, fwd, OpKind::kElementwiseGrad, {{"fn", name}, {"wrt", int64_t{i}}},
                            ins_with_dy(), fwd.inputs[i]);
      return out;
    case OpKind::kReduceSum:
    case OpKind::kBroadcast:
    case OpKind::kIdentity:
    case OpKind::kCast:
      // reduce_sum: broadcast dy back; broadcast: sum dy over the broadcast dims; identity and
      // cast: copy (the same space op, without reduce dims).
      out[0] = space_op(ops, fwd, k == OpKind::kBroadcast ? OpKind::kReduceSum : OpKind::kBroadcast,
                        {}, {dyo}, fwd.inputs[0]);
      return out;
    case OpKind::kReduceMean:
    case OpKind::kGlobalAvgPool: {
      // The window form `%x(n, c, 0, 0)[1, 1, H, W]` averages each window: its windowed rows
      // become index dims of their own, so both forms get the same broadcast gradient.
      Op flat = unroll_windows(fwd, 0);
      double n = 1;
      for (const auto& d : flat.space.dims())
        if (d.reduce) n *= static_cast<double>(d.extent);
      out[0] = space_op(ops, flat, OpKind::kScale, {{"alpha", 1.0 / n}},
                        {with_value(flat.results[0], dy)}, flat.inputs[0]);
      return out;
    }
    case OpKind::kReduceMax:
    case OpKind::kReduceMin: {
      std::vector<Operand> ins = {dyo, fwd.inputs[0], res};
      out[0] = space_op(ops, fwd, OpKind::kElementwiseGrad, {{"fn", name}}, ins, fwd.inputs[0]);
      return out;
    }
    case OpKind::kSoftmax:
      // From the saved output y: dx = y * (dy - sum(dy * y)), no exponential recomputed, and the
      // softmax's input (attention's masked scores) need not live until the backward.
      out[0] = space_op(ops, fwd, OpKind::kNormGrad, {{"fn", std::string("softmax_out")}},
                        {dyo, res}, fwd.inputs[0]);
      return out;
    case OpKind::kLogSoftmax:
    case OpKind::kCrossEntropy:
      out[0] = space_op(ops, fwd, OpKind::kNormGrad, {{"fn", name}}, ins_with_dy(), fwd.inputs[0]);
      return out;
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: {
      double eps = std::get<double>(fwd.attrs.count("eps") ? fwd.attrs.at("eps") : AttrValue(1e-5));
      for (size_t i = 0; i < fwd.inputs.size(); ++i)
        if (wanted[i])
          out[i] = space_op(ops, fwd, OpKind::kNormGrad,
                            {{"fn", name}, {"wrt", static_cast<int64_t>(i)}, {"eps", eps}},
                            ins_with_dy(), fwd.inputs[i]);
      return out;
    }
    case OpKind::kEmbedding:
      out[1] = space_op(ops, fwd, OpKind::kEmbeddingGrad, {}, {fwd.inputs[0], dyo}, fwd.inputs[1]);
      return out;
    case OpKind::kRotary:
      out[0] = space_op(ops, fwd, OpKind::kRotaryGrad, fwd.attrs, {dyo}, fwd.inputs[0]);
      return out;
    case OpKind::kReshape:
    case OpKind::kTranspose: {
      Attrs a;
      // perm is optional (the projections carry the permutation; the verifier checks a given
      // perm against them): the gradient carries the inverse when there is one.
      if (k == OpKind::kTranspose && fwd.attrs.count("perm")) {
        auto perm = std::get<std::vector<int64_t>>(fwd.attrs.at("perm"));
        std::vector<int64_t> inv(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
        a["perm"] = inv;
      }
      out[0] = space_op(ops, fwd, k, a, {dyo}, fwd.inputs[0]);
      return out;
    }
    case OpKind::kSlice: {
      // Pad dy back: a one-input concat whose padded read is shifted by the slice start.
      const IVec xs = ops.shape(fwd.inputs[0].value);
      int64_t r = xs.size();
      std::vector<int64_t> neg;
      for (int64_t v : fwd.inputs[0].proj.map().offset()) neg.push_back(-v);
      Op op;
      op.kind = OpKind::kConcat;
      op.attrs = {{"axis", int64_t{0}}};
      op.space = make_space(dim_names(r), xs.values());
      op.inputs = {{dy, shifted_identity(r, neg), true}};
      op.results = {{-1, identity_proj(r), false}};
      auto v = ops.emit(std::move(op), {TensorType(DType::kF32, xs)});
      if (!v.empty()) out[0] = v[0];
      return out;
    }
    case OpKind::kConcat: {
      int64_t axis = std::get<int64_t>(fwd.attrs.at("axis"));
      const IVec ys = ops.shape(dy);
      for (size_t i = 0; i < fwd.inputs.size(); ++i) {
        if (!wanted[i]) continue;
        const IVec xs = ops.shape(fwd.inputs[i].value);
        std::vector<int64_t> s(static_cast<size_t>(ys.size()), 0), e(ys.values());
        s[axis] = -fwd.inputs[i].proj.map().offset()[axis];
        e[axis] = s[axis] + xs[axis];
        out[i] = fwd.inputs.size() == 1 ? ops.reshape(dy, xs.values()) : ops.slice(dy, s, e);
      }
      return out;
    }
    case OpKind::kEinsum: {
      if (fwd.inputs.size() == 1) {
        out[0] = space_op(ops, fwd, OpKind::kReduceSum, {}, {dyo}, fwd.inputs[0]);
        return out;
      }
      auto la = letters(fwd, fwd.inputs[0].proj);
      auto lb = letters(fwd, fwd.inputs[1].proj);
      auto lc = letters(fwd, res.proj);
      HEDDLE_TRY(la);
      HEDDLE_TRY(lb);
      HEDDLE_TRY(lc);
      // A dim only one input reads that is summed away (`ij,j->j` sums i) makes that input's
      // gradient a broadcast over it, which Ops::einsum cannot size from its operands: such a
      // gradient is the einsum over the forward space itself, writing through the input's
      // projection.
      auto grad = [&](size_t i, const std::string& own, const std::string& other,
                      const std::string& spec) {
        for (char c : own)
          if (other.find(c) == std::string::npos && lc->find(c) == std::string::npos)
            return space_op(ops, fwd, OpKind::kEinsum, {{"spec", spec}},
                            {i == 0 ? dyo : fwd.inputs[0], i == 0 ? fwd.inputs[1] : dyo},
                            fwd.inputs[i]);
        return i == 0 ? ops.einsum(spec, dy, fwd.inputs[1].value)
                      : ops.einsum(spec, fwd.inputs[0].value, dy);
      };
      if (wanted[0]) out[0] = grad(0, *la, *lb, *lc + "," + *lb + "->" + *la);
      if (wanted[1]) out[1] = grad(1, *lb, *la, *la + "," + *lc + "->" + *lb);
      return out;
    }
    case OpKind::kConv2d:
      return conv_grads(ops, fwd, dy, wanted);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d: {
      auto d = pool_grad(ops, fwd, dy);
      HEDDLE_TRY(d);
      out[0] = *d;
      return out;
    }
    case OpKind::kAdd:
    case OpKind::kSub:
      // d(a + b): dy itself for an operand of the result's shape and projection, else dy summed
      // over the dims the operand is broadcast along (a bias). Neither reads a forward value, so
      // the forward's operands need not live until the backward, and a product whose only
      // reader is the add of a bias can fuse with it (runtime/Lower's fuse). -b's gradient
      // negates: elementwise_grad as for the other binary kinds.
      for (size_t i = 0; i < fwd.inputs.size(); ++i) {
        if (!wanted[i] || (k == OpKind::kSub && i == 1)) continue;
        const Operand& x = fwd.inputs[i];
        if (like_result(x))
          out[i] = dy;
        else
          out[i] = space_op(ops, fwd, OpKind::kReduceSum, {}, {dyo}, x);
      }
      if (k == OpKind::kSub && wanted[1])
        out[1] = space_op(ops, fwd, OpKind::kElementwiseGrad,
                          {{"fn", name}, {"wrt", int64_t{1}}, {"alpha", 1.0}}, ins_with_dy(),
                          fwd.inputs[1]);
      return out;
    default:
      if (cat == OpCategory::kUnary ||
          (cat == OpCategory::kBinary && k != OpKind::kElementwiseGrad)) {
        for (size_t i = 0; i < fwd.inputs.size(); ++i)
          if (wanted[i])
            out[i] = space_op(ops, fwd, OpKind::kElementwiseGrad,
                              {{"fn", name}, {"wrt", static_cast<int64_t>(i)}, {"alpha", alpha()}},
                              ins_with_dy(), fwd.inputs[i]);
        return out;
      }
      break;
  }
  std::string form;
  if (cat == OpCategory::kOptimizer || k == OpKind::kElementwiseGrad || k == OpKind::kNormGrad ||
      k == OpKind::kEmbeddingGrad || k == OpKind::kConv2dGradInput ||
      k == OpKind::kConv2dGradWeight || k == OpKind::kPool2dGrad || k == OpKind::kRotaryGrad)
    form = "gradient and optimizer kinds are not differentiated (no second-order gradients)";
  else
    form = "the forms that train are the ones the Ops builders make (docs/ir.md, 'Training')";
  return Diagnostic("autodiff: no gradient rule for op '" + name + "' in this form: " + form);
}

}  // namespace heddle::grad_detail
