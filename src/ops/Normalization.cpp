// Reductions and row-wise normalizations. Reduced dims become reduce dims of the index space;
// softmax, layernorm, rmsnorm and cross-entropy keep their normalized dim inside the window.
#include <algorithm>

#include "OpsUtil.h"
#include "heddle/ops/Ops.h"

namespace heddle {

using namespace ops_detail;

ValueId Ops::reduce(OpKind kind, ValueId x, std::vector<int64_t> axes, bool keepdims) {
  if (bad({x})) return kNoValue;
  std::string_view name = op_kind_name(kind);
  Monoid m;
  switch (kind) {
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
      m = Monoid::kSum;
      break;
    case OpKind::kReduceMax:
      m = Monoid::kMax;
      break;
    case OpKind::kReduceMin:
      m = Monoid::kMin;
      break;
    default:
      return error(name, "is not a reduction");
  }
  const IVec& s = shape(x);
  int64_t r = s.size();
  std::vector<bool> is_red(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    int64_t n = norm_axis(a, r);
    if (n < 0)
      return error(name, "field 'axes' entry " + std::to_string(a) + " is out of range for " +
                             type(x).to_string());
    if (is_red[n]) return error(name, "field 'axes' names dim " + std::to_string(n) + " twice");
    is_red[n] = true;
  }
  // Parallel dims first, then reduce dims, each in tensor order.
  std::vector<int64_t> order;
  for (int64_t i = 0; i < r; ++i)
    if (!is_red[i]) order.push_back(i);
  for (int64_t i = 0; i < r; ++i)
    if (is_red[i]) order.push_back(i);
  std::vector<std::string> names;
  std::vector<int64_t> ext;
  std::vector<std::optional<Monoid>> red;
  std::vector<int64_t> in_dims(static_cast<size_t>(r)), out_dims, oshape;
  for (size_t k = 0; k < order.size(); ++k) {
    int64_t i = order[k];
    names.push_back("d" + std::to_string(i));
    ext.push_back(s[i]);
    red.push_back(is_red[i] ? std::optional<Monoid>(m) : std::nullopt);
    in_dims[i] = static_cast<int64_t>(k);
  }
  for (int64_t i = 0; i < r; ++i) {
    if (!is_red[i]) {
      out_dims.push_back(in_dims[i]);
      oshape.push_back(s[i]);
    } else if (keepdims) {
      out_dims.push_back(-1);
      oshape.push_back(1);
    }
  }
  Op op;
  op.kind = kind;
  op.space = make_space(names, ext, red);
  op.inputs = {{x, select_proj(r, in_dims), false}};
  op.results = {{-1, select_proj(r, out_dims), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec(oshape)));
}

ValueId Ops::norm_like(OpKind kind, ValueId x, int64_t axis, std::vector<ValueId> extra,
                       Attrs attrs) {
  std::string_view name = op_kind_name(kind);
  const IVec& s = shape(x);
  int64_t r = s.size();
  int64_t ax = norm_axis(axis, r);
  if (ax < 0)
    return error(name, "field 'axis' = " + std::to_string(axis) + " is out of range for " +
                           type(x).to_string());
  for (ValueId e : extra)
    if (shape(e) != IVec{s[ax]})
      return error(name, "gain/bias " + type(e).to_string() + " must be [" + std::to_string(s[ax]) +
                             "] (the normalized dim)");
  std::vector<std::string> names;
  std::vector<int64_t> ext, dims, win(static_cast<size_t>(r), 1);
  for (int64_t i = 0; i < r; ++i) {
    if (i == ax) {
      dims.push_back(-1);
      continue;
    }
    dims.push_back(static_cast<int64_t>(names.size()));
    names.push_back("d" + std::to_string(i));
    ext.push_back(s[i]);
  }
  win[ax] = s[ax];
  int64_t n = static_cast<int64_t>(names.size());
  Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.space = make_space(names, ext);
  op.inputs = {{x, select_proj(n, dims, win), false}};
  for (ValueId e : extra) op.inputs.push_back({e, select_proj(n, {-1}, {s[ax]}), false});
  op.results = {{-1, select_proj(n, dims, win), false}};
  return emit1(std::move(op), type(x));
}

ValueId Ops::softmax(ValueId x, int64_t axis) {
  if (bad({x})) return kNoValue;
  int64_t ax = norm_axis(axis, shape(x).size());
  return norm_like(OpKind::kSoftmax, x, axis, {}, {{"axis", ax < 0 ? axis : ax}});
}

ValueId Ops::log_softmax(ValueId x, int64_t axis) {
  if (bad({x})) return kNoValue;
  int64_t ax = norm_axis(axis, shape(x).size());
  return norm_like(OpKind::kLogSoftmax, x, axis, {}, {{"axis", ax < 0 ? axis : ax}});
}

ValueId Ops::layernorm(ValueId x, ValueId gamma, ValueId beta, double eps) {
  if (bad({x})) return kNoValue;
  if ((gamma == kNoValue) != (beta == kNoValue))
    return error("layernorm", "give both gamma and beta, or neither");
  if (!(eps > 0)) return error("layernorm", "field 'eps' must be positive");
  std::vector<ValueId> extra;
  if (gamma != kNoValue) extra = {gamma, beta};
  return norm_like(OpKind::kLayerNorm, x, -1, extra, {{"eps", eps}});
}

ValueId Ops::rmsnorm(ValueId x, ValueId gamma, double eps) {
  if (bad({x})) return kNoValue;
  if (!(eps > 0)) return error("rmsnorm", "field 'eps' must be positive");
  std::vector<ValueId> extra;
  if (gamma != kNoValue) extra = {gamma};
  return norm_like(OpKind::kRmsNorm, x, -1, extra, {{"eps", eps}});
}

ValueId Ops::cross_entropy(ValueId logits, ValueId labels) {
  if (bad({logits, labels})) return kNoValue;
  const IVec& s = shape(logits);
  int64_t r = s.size();
  if (r < 1 || shape(labels).size() != r - 1 ||
      !std::equal(shape(labels).begin(), shape(labels).end(), s.begin()))
    return error("cross_entropy", "labels " + type(labels).to_string() +
                                      " must be the logits' shape " + type(logits).to_string() +
                                      " without its last (class) dim");
  if (dtype_is_float(type(labels).dtype()))
    return error("cross_entropy", "field 'labels' must be integer");
  std::vector<int64_t> dims, win(static_cast<size_t>(r), 1), ldims;
  for (int64_t i = 0; i < r - 1; ++i) dims.push_back(i);
  ldims = dims;
  dims.push_back(-1);
  win[r - 1] = s[r - 1];
  std::vector<int64_t> ext(s.begin(), s.end() - 1);
  Op op;
  op.kind = OpKind::kCrossEntropy;
  op.space = make_space(dim_names(r - 1), ext);
  op.inputs = {{logits, select_proj(r - 1, dims, win), false},
               {labels, select_proj(r - 1, ldims), false}};
  op.results = {{-1, select_proj(r - 1, ldims), false}};
  return emit1(std::move(op), TensorType(type(logits).dtype(), shape(labels)));
}

std::vector<ValueId> Ops::topk_gating(ValueId probs, int64_t k, int64_t capacity) {
  if (bad({probs})) return {};
  const IVec& s = shape(probs);
  if (s.size() != 2 || s[1] < 1) {
    error("topk_gating", "probs must be [tokens, experts], got " + type(probs).to_string());
    return {};
  }
  if (k < 1 || k > s[1]) {
    error("topk_gating", "field 'k' = " + std::to_string(k) +
                             " must be in [1, experts = " + std::to_string(s[1]) + "]");
    return {};
  }
  if (capacity < 1) {
    error("topk_gating", "field 'capacity' must be >= 1");
    return {};
  }
  Op op;
  op.kind = OpKind::kTopkGating;
  op.attrs = {{"capacity", capacity}, {"k", k}};
  op.space = IndexSpace();
  op.inputs = {{probs, make_proj(0, {{}, {}}, {}, {s[0], s[1]}), false}};
  auto rp = make_proj(0, {{}, {}, {}}, {}, {s[0], s[1], capacity});
  op.results = {{-1, rp, false}, {-1, rp, false}};
  TensorType t(type(probs).dtype(), IVec{s[0], s[1], capacity});
  return emit(std::move(op), {t, t});
}

}  // namespace heddle
