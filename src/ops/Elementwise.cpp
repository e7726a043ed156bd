// Elementwise builders: unary, binary and select ops with NumPy broadcasting (broadcast dims get a
// zero row in the operand's projection), causal masking, rotary embeddings, optimizer updates.
#include "OpsUtil.h"
#include "heddle/ops/Ops.h"

namespace heddle {

using namespace ops_detail;

namespace {

// Broadcast shapes NumPy-style; empty optional on a mismatch (dim index in *bad).
std::optional<IVec> broadcast_shapes(const std::vector<IVec>& shapes, int64_t* bad) {
  int64_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  std::vector<int64_t> out(static_cast<size_t>(r), 1);
  for (const auto& s : shapes)
    for (int64_t i = 0; i < s.size(); ++i) {
      int64_t o = r - s.size() + i, e = s[i];
      if (e == out[o] || e == 1) continue;
      if (out[o] == 1) {
        out[o] = e;
        continue;
      }
      *bad = o;
      return std::nullopt;
    }
  return IVec(std::move(out));
}

// The projection of an operand of `shape` into the broadcast index space of rank `r`.
IndexProjection broadcast_proj(const IVec& shape, const IVec& out) {
  int64_t r = out.size();
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < shape.size(); ++i) {
    int64_t o = r - shape.size() + i;
    dims.push_back(shape[i] == 1 && out[o] != 1 ? -1 : o);
  }
  return select_proj(r, dims);
}

}  // namespace

ValueId Ops::unary(OpKind kind, ValueId x, Attrs attrs) {
  if (bad({x})) return kNoValue;
  const auto& info = op_kind_info(kind);
  if (info.category != OpCategory::kUnary) return error(info.name, "is not a unary elementwise op");
  if (kind == OpKind::kScale && !attrs.count("alpha"))
    return error(info.name, "field 'alpha' is required");
  const IVec& s = shape(x);
  Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.space = make_space(dim_names(s.size()), s.values());
  op.inputs = {{x, identity_proj(s.size()), false}};
  op.results = {{-1, identity_proj(s.size()), false}};
  return emit1(std::move(op), type(x));
}

ValueId Ops::activation(std::string_view name, ValueId x) {
  static const std::pair<std::string_view, OpKind> kActs[] = {
      {"relu", OpKind::kRelu},          {"gelu", OpKind::kGelu},
      {"gelu_tanh", OpKind::kGeluTanh}, {"silu", OpKind::kSilu},
      {"sigmoid", OpKind::kSigmoid},    {"tanh", OpKind::kTanh},
      {"identity", OpKind::kIdentity}};
  for (auto [n, k] : kActs)
    if (n == name) return unary(k, x);
  return error("activation",
               "field 'activation' must be one of relu, gelu, gelu_tanh, silu, "
               "sigmoid, tanh, identity; got '" +
                   std::string(name) + "'");
}

ValueId Ops::binary(OpKind kind, ValueId a, ValueId b) {
  if (bad({a, b})) return kNoValue;
  const auto& info = op_kind_info(kind);
  if (info.category != OpCategory::kBinary || kind == OpKind::kElementwiseGrad)
    return error(info.name, "is not a binary elementwise op");
  int64_t bad_dim = 0;
  auto out = broadcast_shapes({shape(a), shape(b)}, &bad_dim);
  if (!out)
    return error(info.name, "shapes " + shape(a).to_string() + " and " + shape(b).to_string() +
                                " do not broadcast (dim " + std::to_string(bad_dim) + ")");
  if (type(a).dtype() != type(b).dtype())
    return error(info.name, "operands must share one element type");
  Op op;
  op.kind = kind;
  op.space = make_space(dim_names(out->size()), out->values());
  op.inputs = {{a, broadcast_proj(shape(a), *out), false},
               {b, broadcast_proj(shape(b), *out), false}};
  op.results = {{-1, identity_proj(out->size()), false}};
  return emit1(std::move(op), TensorType(type(a).dtype(), *out));
}

ValueId Ops::where(ValueId cond, ValueId a, ValueId b) {
  if (bad({cond, a, b})) return kNoValue;
  if (type(cond).dtype() != DType::kBool) return error("where", "field 'cond' must be bool");
  int64_t bad_dim = 0;
  auto out = broadcast_shapes({shape(cond), shape(a), shape(b)}, &bad_dim);
  if (!out) return error("where", "shapes do not broadcast (dim " + std::to_string(bad_dim) + ")");
  Op op;
  op.kind = OpKind::kWhere;
  op.space = make_space(dim_names(out->size()), out->values());
  for (ValueId v : {cond, a, b}) op.inputs.push_back({v, broadcast_proj(shape(v), *out), false});
  op.results = {{-1, identity_proj(out->size()), false}};
  return emit1(std::move(op), TensorType(type(a).dtype(), *out));
}

ValueId Ops::causal_mask(ValueId x) {
  if (bad({x})) return kNoValue;
  if (shape(x).size() < 2) return error("causal_mask", "input must have rank >= 2 (..., q, k)");
  return unary(OpKind::kCausalMask, x);
}

ValueId Ops::rotary(ValueId x, double theta) {
  if (bad({x})) return kNoValue;
  const IVec& s = shape(x);
  int64_t r = s.size();
  if (r < 3) return error("rotary", "input must have rank >= 3 (..., seq, heads, head_dim)");
  if (s[r - 1] % 2 != 0)
    return error("rotary", "head dim " + std::to_string(s[r - 1]) + " must be even");
  if (!(theta > 0)) return error("rotary", "field 'theta' must be positive");
  std::vector<int64_t> ext(s.values());
  ext[r - 1] /= 2;
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < r; ++i) {
    std::vector<int64_t> row(static_cast<size_t>(r), 0);
    row[i] = i == r - 1 ? 2 : 1;
    rows.push_back(row);
  }
  std::vector<int64_t> win(static_cast<size_t>(r), 1);
  win[r - 1] = 2;
  Op op;
  op.kind = OpKind::kRotary;
  op.attrs = {{"theta", theta}};
  op.space = make_space(dim_names(r), ext);
  op.inputs = {{x, make_proj(r, rows, {}, win), false}};
  op.results = {{-1, make_proj(r, rows, {}, win), false}};
  return emit1(std::move(op), type(x));
}

std::vector<ValueId> Ops::sgd_momentum(ValueId param, ValueId grad, ValueId velocity,
                                       const SgdOptions& o) {
  if (bad({param, grad, velocity})) return {};
  if (shape(param) != shape(grad) || shape(param) != shape(velocity)) {
    error("sgd_momentum", "param, grad and velocity must have one shape");
    return {};
  }
  if (!(o.lr > 0)) {
    error("sgd_momentum", "field 'lr' must be positive");
    return {};
  }
  int64_t r = shape(param).size();
  Op op;
  op.kind = OpKind::kSgdMomentum;
  op.attrs = {{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weight_decay}};
  op.space = make_space(dim_names(r), shape(param).values());
  for (ValueId v : {param, grad, velocity}) op.inputs.push_back({v, identity_proj(r), false});
  op.results = {{-1, identity_proj(r), false}, {-1, identity_proj(r), false}};
  return emit(std::move(op), {type(param), type(param)});
}

std::vector<ValueId> Ops::adamw(ValueId param, ValueId grad, ValueId m, ValueId v,
                                const AdamWOptions& o, int64_t step) {
  if (bad({param, grad, m, v})) return {};
  if (shape(param) != shape(grad) || shape(param) != shape(m) || shape(param) != shape(v)) {
    error("adamw", "param, grad, m and v must have one shape");
    return {};
  }
  if (!(o.lr > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) || step < 1) {
    error("adamw", "needs lr > 0, 0 <= beta1, beta2 < 1 and step >= 1");
    return {};
  }
  int64_t r = shape(param).size();
  Op op;
  op.kind = OpKind::kAdamW;
  op.attrs = {{"lr", o.lr},
              {"beta1", o.beta1},
              {"beta2", o.beta2},
              {"eps", o.eps},
              {"weight_decay", o.weight_decay},
              {"step", step}};
  op.space = make_space(dim_names(r), shape(param).values());
  for (ValueId x : {param, grad, m, v}) op.inputs.push_back({x, identity_proj(r), false});
  op.results = {
      {-1, identity_proj(r), false}, {-1, identity_proj(r), false}, {-1, identity_proj(r), false}};
  return emit(std::move(op), {type(param), type(param), type(param)});
}

}  // namespace heddle
