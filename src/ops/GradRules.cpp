// Gradient rules. Most are generic over index spaces: the gradient for an input is an op over the
// forward op's own index space in which the dims that input's projection uses are parallel and
// the others reduce(sum), writing through the input's projection (broadcast operands thus get
// their sums for free). Windowed ops with overlapping windows (conv, pooling) and offset
// projections (slice, concat) get their own signatures.
#include "GradRules.h"

#include <cmath>

#include "OpsUtil.h"

namespace heddle::grad_detail {

using namespace ops_detail;

namespace {

bool uses(const IndexProjection& p, int64_t dim) {
  for (int64_t r = 0; r < p.tensor_rank(); ++r)
    if (p.map().at(r, dim) != 0) return true;
  return false;
}

// An op over fwd's index space writing `target`'s value shape through target's projection.
ValueId space_op(Ops& ops, const Op& fwd, OpKind kind, Attrs attrs, std::vector<Operand> ins,
                 const Operand& target) {
  if (!ops.ok()) return kNoValue;
  std::vector<IndexDim> dims = fwd.space.dims();
  for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k)
    dims[k].reduce = uses(target.proj, k) ? std::nullopt : std::optional<Monoid>(Monoid::kSum);
  Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.space = IndexSpace(std::move(dims));
  op.inputs = std::move(ins);
  op.results = {{-1, target.proj, false}};
  const TensorType& t = ops.type(target.value);
  auto r = ops.emit(std::move(op), {TensorType(DType::kF32, t.shape())});
  return r.empty() ? kNoValue : r[0];
}

Operand with_value(const Operand& o, ValueId v) { return {v, o.proj, o.padded}; }

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
                        " is not a plain selection of index dims");
    s += static_cast<char>('a' + dim);
  }
  return s;
}

int64_t find_dim(const Op& op, const char* name) { return op.space.find(name); }

// conv2d: weight gradient over [(g), co, ci, kh, kw, n:sum, oh:sum, ow:sum] (an affine product
// with a padded read of x) and input gradient over [n, (g), ci, ih, iw, co:sum].
Result<std::vector<ValueId>> conv_grads(Ops& ops, const Op& fwd, ValueId dy) {
  for (const char* n : {"n", "co", "oh", "ow", "ci"})
    if (find_dim(fwd, n) < 0)
      return Diagnostic(
          "autodiff: conv2d needs the index dims n, co, oh, ow, ci (as built by Ops)");
  bool grouped = find_dim(fwd, "g") >= 0;
  auto ext = [&](const char* n) {
    return grouped || std::string(n) != "g" ? fwd.space.dim(find_dim(fwd, n)).extent : 1;
  };
  auto st = std::get<std::vector<int64_t>>(fwd.attrs.at("stride"));
  auto pad = std::get<std::vector<int64_t>>(fwd.attrs.at("padding"));
  auto dil = std::get<std::vector<int64_t>>(fwd.attrs.at("dilation"));
  int64_t G = ext("g"), cog = ext("co"), cig = ext("ci"), OH = ext("oh"), OW = ext("ow");
  const TensorType &xt = ops.type(fwd.inputs[0].value), &wt = ops.type(fwd.inputs[1].value);
  int64_t KH = wt.shape()[2], KW = wt.shape()[3], N = xt.shape()[0], H = xt.shape()[2],
          W = xt.shape()[3];
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
  {  // weight
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
    op.attrs = fwd.attrs;
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
    auto r = ops.emit(std::move(op), {TensorType(DType::kF32, wt.shape())});
    if (!r.empty()) out[1] = r[0];
  }
  {  // input
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
    op.attrs = fwd.attrs;
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
    auto r = ops.emit(std::move(op), {TensorType(DType::kF32, xt.shape())});
    if (!r.empty()) out[0] = r[0];
  }
  return out;
}

ValueId pool_grad(Ops& ops, const Op& fwd, ValueId dy) {
  const TensorType& xt = ops.type(fwd.inputs[0].value);
  const TensorType& yt = ops.type(dy);
  const IVec& x = xt.shape();
  Op op;
  op.kind = OpKind::kPool2dGrad;
  op.attrs = fwd.attrs;
  op.attrs["mode"] = std::string(fwd.kind == OpKind::kMaxPool2d ? "max" : "avg");
  op.space = make_space({"n", "c", "ih", "iw"}, x.values());
  op.inputs = {{dy, select_proj(4, {0, 1, -1, -1}, {1, 1, yt.shape()[2], yt.shape()[3]}), false},
               {fwd.inputs[0].value, select_proj(4, {0, 1, -1, -1}, {1, 1, x[2], x[3]}), false}};
  op.results = {{-1, identity_proj(4), false}};
  auto r = ops.emit(std::move(op), {TensorType(DType::kF32, x)});
  return r.empty() ? kNoValue : r[0];
}

}  // namespace

Result<std::vector<ValueId>> op_gradients(Ops& ops, OpId id, ValueId dy) {
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
  switch (k) {
    case OpKind::kFill:
      return out;
    case OpKind::kCausalMask:
      out[0] = space_op(ops, fwd, OpKind::kElementwiseGrad, {{"fn", name}}, ins_with_dy(),
                        fwd.inputs[0]);
      return out;
    case OpKind::kWhere:
      for (int i : {1, 2})
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
      if (fwd.inputs[0].proj.window().product() != 1) break;
      double n = 1;
      for (const auto& d : fwd.space.dims())
        if (d.reduce) n *= static_cast<double>(d.extent);
      out[0] = space_op(ops, fwd, OpKind::kScale, {{"alpha", 1.0 / n}}, {dyo}, fwd.inputs[0]);
      return out;
    }
    case OpKind::kReduceMax:
    case OpKind::kReduceMin: {
      std::vector<Operand> ins = {dyo, fwd.inputs[0], res};
      out[0] = space_op(ops, fwd, OpKind::kElementwiseGrad, {{"fn", name}}, ins, fwd.inputs[0]);
      return out;
    }
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kCrossEntropy:
      out[0] = space_op(ops, fwd, OpKind::kNormGrad, {{"fn", name}}, ins_with_dy(), fwd.inputs[0]);
      return out;
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: {
      double eps = std::get<double>(fwd.attrs.count("eps") ? fwd.attrs.at("eps") : AttrValue(1e-5));
      for (size_t i = 0; i < fwd.inputs.size(); ++i)
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
      if (k == OpKind::kTranspose) {
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
      const IVec& xs = ops.type(fwd.inputs[0].value).shape();
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
      const IVec& ys = ops.type(dy).shape();
      for (size_t i = 0; i < fwd.inputs.size(); ++i) {
        const IVec& xs = ops.type(fwd.inputs[i].value).shape();
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
      out[0] = ops.einsum(*lc + "," + *lb + "->" + *la, dy, fwd.inputs[1].value);
      out[1] = ops.einsum(*la + "," + *lc + "->" + *lb, fwd.inputs[0].value, dy);
      return out;
    }
    case OpKind::kConv2d:
      if (fwd.inputs.size() != 2) break;
      return conv_grads(ops, fwd, dy);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      out[0] = pool_grad(ops, fwd, dy);
      return out;
    default:
      if (cat == OpCategory::kUnary ||
          (cat == OpCategory::kBinary && k != OpKind::kElementwiseGrad)) {
        double alpha = fwd.attrs.count("alpha") ? std::get<double>(fwd.attrs.at("alpha")) : 1.0;
        for (size_t i = 0; i < fwd.inputs.size(); ++i)
          out[i] = space_op(ops, fwd, OpKind::kElementwiseGrad,
                            {{"fn", name}, {"wrt", static_cast<int64_t>(i)}, {"alpha", alpha}},
                            ins_with_dy(), fwd.inputs[i]);
        return out;
      }
      break;
  }
  return Diagnostic("autodiff: no gradient rule for op '" + name + "' in this form");
}

}  // namespace heddle::grad_detail
