// Constant folding at import: shape-computing subgraphs (Shape, Gather, Unsqueeze, Concat, Cast,
// Slice, arithmetic on static shapes) and any supported node whose inputs are all constants.
#include <cmath>
#include <limits>
#include <map>

#include "OnnxImporter.h"
#include "heddle/support/Numeric.h"

namespace heddle::onnx_detail {

namespace {

constexpr int64_t kMaxFoldElements = 1 << 22;  // larger all-constant nodes import as ops

double get(const Tensor& t, int64_t i) {
  return t.is_int() ? static_cast<double>(t.i64()[i]) : static_cast<double>(t.f32()[i]);
}

void put(Tensor& t, int64_t i, double v) {
  if (t.is_int())
    t.i64()[i] = saturating_int64(v);
  else
    t.f32()[i] = saturating_float(v);
}

IVec unravel(int64_t i, const IVec& shape) {
  std::vector<int64_t> p(static_cast<size_t>(shape.size()), 0);
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (shape[d] > 0) {
      p[d] = i % shape[d];
      i /= shape[d];
    }
  }
  return IVec(p);
}

int64_t ravel(const std::vector<int64_t>& p, const IVec& shape) {
  int64_t i = 0;
  for (int64_t d = 0; d < shape.size(); ++d) i = i * shape[d] + p[d];
  return i;
}

// Flat index into `t` of output point `p` under NumPy broadcasting (t right-aligned).
int64_t bcast_index(const Tensor& t, const IVec& p) {
  int64_t off = p.size() - t.rank();
  std::vector<int64_t> q(static_cast<size_t>(t.rank()));
  for (int64_t d = 0; d < t.rank(); ++d) q[d] = t.shape()[d] == 1 ? 0 : p[d + off];
  return ravel(q, t.shape());
}

std::optional<IVec> bcast_shape(const std::vector<IVec>& shapes) {
  int64_t r = 0;
  for (const IVec& t : shapes) r = std::max(r, t.size());
  std::vector<int64_t> s(static_cast<size_t>(r), 1);
  for (const IVec& t : shapes)
    for (int64_t d = 0; d < t.size(); ++d) {
      int64_t& o = s[d + r - t.size()];
      int64_t v = t[d];
      if (v == o || v == 1) continue;
      if (o != 1) return std::nullopt;
      o = v;
    }
  return IVec(s);
}

Tensor ints_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kI64, IVec{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.i64()[i] = v[i];
  return t;
}

std::vector<int64_t> to_ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(saturating_int64(get(t, i)));
  return v;
}

// Elements of `x` rearranged: out[p] = x[src(p)].
template <class F>
Tensor gather_by(const Tensor& x, DType dtype, const IVec& shape, F src) {
  Tensor out(dtype, shape);
  for (int64_t i = 0; i < out.numel(); ++i) put(out, i, get(x, src(unravel(i, shape))));
  return out;
}

}  // namespace

/// The shape ONNX Reshape asks for: 0 copies the input dim, -1 is inferred.
Result<std::vector<int64_t>> reshape_target(Importer& im, const onnx::NodeProto& n,
                                            const IVec& in) {
  auto s = im.ints(n, 1, "shape");
  HEDDLE_TRY(s);
  if (auto t = im.rebatch_reshape(n, in, *s)) *s = *t;
  std::vector<int64_t> out = *s;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && attr_int(n, "allowzero", 0) == 0) {
      if (static_cast<int64_t>(i) >= in.size())
        return im.error(n,
                        "shape entry " + std::to_string(i) + " is 0 (copy) past the input's rank");
      out[i] = in[i];
    }
    if (out[i] < -1 || (out[i] == -1 && infer >= 0))
      return im.error(n, "shape " + IVec(*s).to_string() + " has a bad entry");
    if (out[i] == -1)
      infer = static_cast<int64_t>(i);
    else if (out[i] > 0 && known > (int64_t{1} << 40) / out[i])
      return im.error(n, "shape " + IVec(*s).to_string() + " is too large");
    else
      known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || in.product() % known != 0)
      return im.error(n, "cannot infer -1 in shape for input " + in.to_string());
    out[infer] = in.product() / known;
  }
  int64_t total = 1;
  for (int64_t v : out) total *= v;
  if (total != in.product())
    return im.error(n, "target shape " + IVec(out).to_string() + " has " + std::to_string(total) +
                           " elements, the input " + in.to_string() + " has " +
                           std::to_string(in.product()));
  return out;
}

namespace {

bool set_output(Importer& im, const onnx::NodeProto& n, Tensor t) {
  im.set_constant(n.output(0), std::move(t));
  return true;
}

// `x`'s elements in row-major order under another shape of as many elements.
bool set_reshaped(Importer& im, const onnx::NodeProto& n, const Tensor& x, const IVec& shape) {
  Tensor out(x.dtype(), shape);
  for (int64_t i = 0; i < x.numel(); ++i) put(out, i, get(x, i));
  return set_output(im, n, out);
}

// One op's folding: true when it set the node's output as a constant, false to import the node
// as an op. `in`: per input its constant, null for an omitted optional input.
using Folder = Result<bool> (*)(Importer& im, const onnx::NodeProto& n,
                                const std::vector<const Tensor*>& in);

Result<bool> fold_constant(Importer& im, const onnx::NodeProto& n,
                           const std::vector<const Tensor*>&) {
  const auto* a = find_attr(n, "value");
  if (a) {
    auto t = tensor_from_proto(a->t(), ".", "");
    if (!t.ok() || !*t) return im.error(n, "the 'value' tensor cannot be read");
    im.set_constant(n.output(0), std::move(**t));
  } else if ((a = find_attr(n, "value_float"))) {
    Tensor t(DType::kF32, IVec{});
    t.f32()[0] = a->f();
    im.set_constant(n.output(0), t);
  } else if ((a = find_attr(n, "value_int"))) {
    Tensor t(DType::kI64, IVec{});
    t.i64()[0] = a->i();
    im.set_constant(n.output(0), t);
  } else if ((a = find_attr(n, "value_ints"))) {
    im.set_constant(n.output(0), ints_tensor({a->ints().begin(), a->ints().end()}));
  } else {
    return im.error(n, "only 'value', 'value_float', 'value_int' and 'value_ints' are supported");
  }
  return true;
}

Result<bool> fold_shape(Importer& im, const onnx::NodeProto& n, const std::vector<const Tensor*>&) {
  if (!im.has(n.input(0))) return false;
  IVec s = im.type(n.input(0)).shape();
  int64_t r = s.size();
  int64_t b = std::clamp(norm_axis(attr_int(n, "start", 0), r), int64_t{0}, r);
  int64_t e = std::clamp(norm_axis(attr_int(n, "end", r), r), int64_t{0}, r);
  std::vector<int64_t> v;
  for (int64_t i = b; i < e; ++i) v.push_back(s[i]);
  im.set_constant(n.output(0), ints_tensor(v));
  return true;
}

Result<bool> fold_identity(Importer& im, const onnx::NodeProto& n,
                           const std::vector<const Tensor*>& in) {
  return set_output(im, n, *in[0]);
}

Result<bool> fold_cast(Importer& im, const onnx::NodeProto& n,
                       const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  auto dt = dtype_from_onnx(static_cast<int32_t>(attr_int(n, "to", 1)));
  if (!dt) return false;
  Tensor out(*dt, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = get(x, i);
    put(out, i, *dt == DType::kBool ? (v != 0) : v);
  }
  return set_output(im, n, out);
}

Result<bool> fold_binary(Importer& im, const onnx::NodeProto& n,
                         const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const std::string& op = n.op_type();
  std::vector<IVec> shapes;
  for (auto* t : in) shapes.push_back(t->shape());
  auto shape = bcast_shape(shapes);
  if (!shape) return im.error(n, "constant operands do not broadcast");
  if (shape->product() > kMaxFoldElements) return false;
  DType dt = op == "Equal" || op == "Less" || op == "Greater" ? DType::kBool
             : op == "Where"                                  ? in[1]->dtype()
                                                              : x.dtype();
  Tensor out(dt, *shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    IVec p = unravel(i, *shape);
    double a = get(*in[0], bcast_index(*in[0], p)), b = get(*in[1], bcast_index(*in[1], p));
    double v = 0;
    if (op == "Add") v = a + b;
    if (op == "Sub") v = a - b;
    if (op == "Mul") v = a * b;
    if (op == "Div") v = x.is_int() ? (b == 0 ? 0 : std::trunc(a / b)) : a / b;
    if (op == "Pow") v = std::pow(a, b);
    if (op == "Mod")  // fmod=1: C's fmod (sign of a); fmod=0: Python's (sign of b)
      v = b == 0 ? 0 : attr_int(n, "fmod", 0) ? std::fmod(a, b) : a - b * std::floor(a / b);
    if (op == "Equal") v = a == b;
    if (op == "Less") v = a < b;
    if (op == "Greater") v = a > b;
    if (op == "Max") v = std::max(a, b);
    if (op == "Min") v = std::min(a, b);
    if (op == "Where") v = a != 0 ? b : get(*in[2], bcast_index(*in[2], p));
    put(out, i, v);
  }
  return set_output(im, n, out);
}

Result<bool> fold_unary(Importer& im, const onnx::NodeProto& n,
                        const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const std::string& op = n.op_type();
  Tensor out(x.dtype(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = get(x, i);
    put(out, i, op == "Not" ? (v == 0) : op == "Neg" ? -v : std::sqrt(v));
  }
  return set_output(im, n, out);
}

Result<bool> fold_constant_of_shape(Importer& im, const onnx::NodeProto& n,
                                    const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  Tensor fill(DType::kF32, IVec{1});
  if (const auto* a = find_attr(n, "value")) {
    auto t = tensor_from_proto(a->t(), ".", "");
    if (!t.ok() || !*t) return im.error(n, "the 'value' tensor cannot be read");
    fill = **t;
  }
  std::vector<int64_t> shape = to_ints(x);
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > kMaxFoldElements / d))
      return im.error(n, "shape " + IVec(shape).to_string() + " is negative or too large");
    numel *= d;
  }
  if (fill.numel() < 1) return im.error(n, "'value' is empty");
  Tensor out(fill.dtype(), IVec(shape));
  out.fill(get(fill, 0));
  return set_output(im, n, out);
}

Result<bool> fold_range(Importer& im, const onnx::NodeProto& n,
                        const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  double start = get(x, 0), limit = get(*in[1], 0), delta = get(*in[2], 0);
  if (delta == 0) return im.error(n, "delta is zero");
  double steps = std::ceil((limit - start) / delta);
  if (!(steps < static_cast<double>(kMaxFoldElements)))
    return im.error(n, "the range is too long to fold");
  int64_t count = std::max<int64_t>(0, saturating_int64(steps));
  Tensor out(x.dtype(), IVec{count});
  for (int64_t i = 0; i < count; ++i) put(out, i, start + static_cast<double>(i) * delta);
  return set_output(im, n, out);
}

Result<bool> fold_squeeze(Importer& im, const onnx::NodeProto& n,
                          const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  std::vector<int64_t> axes = in.size() > 1 && in[1] ? to_ints(*in[1]) : attr_ints(n, "axes");
  auto s = squeezed_shape(im, n, x.shape(), axes);
  HEDDLE_TRY(s);
  return set_reshaped(im, n, x, IVec(*s));
}

Result<bool> fold_reshape(Importer& im, const onnx::NodeProto& n,
                          const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  auto s = reshape_target(im, n, x.shape());
  HEDDLE_TRY(s);
  return set_reshaped(im, n, x, IVec(*s));
}

Result<bool> fold_concat(Importer& im, const onnx::NodeProto& n,
                         const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  auto ax = checked_axis(im, n, attr_int(n, "axis", 0), x.rank());
  HEDDLE_TRY(ax);
  int64_t axis = *ax;
  for (auto* t : in) {
    if (!t || t->rank() != x.rank() || t->dtype() != x.dtype())
      return im.error(n, "inputs must be defined and share rank and element type");
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != axis && t->shape()[d] != x.shape()[d])
        return im.error(n, "inputs differ in dim " + std::to_string(d));
  }
  std::vector<int64_t> s;
  for (int64_t d = 0; d < x.rank(); ++d) s.push_back(x.shape()[d]);
  s[axis] = 0;
  for (auto* t : in) s[axis] += t->shape()[axis];
  Tensor out(x.dtype(), IVec(s));
  int64_t off = 0;
  for (auto* t : in) {
    for (int64_t i = 0; i < t->numel(); ++i) {
      IVec p = unravel(i, t->shape());
      std::vector<int64_t> q(p.begin(), p.end());
      q[axis] += off;
      put(out, ravel(q, out.shape()), get(*t, i));
    }
    off += t->shape()[axis];
  }
  return set_output(im, n, out);
}

Result<bool> fold_gather(Importer& im, const onnx::NodeProto& n,
                         const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const Tensor& idx = *in[1];
  auto ax = checked_axis(im, n, attr_int(n, "axis", 0), x.rank());
  HEDDLE_TRY(ax);
  int64_t axis = *ax;
  std::vector<int64_t> s;
  for (int64_t d = 0; d < axis; ++d) s.push_back(x.shape()[d]);
  for (int64_t d = 0; d < idx.rank(); ++d) s.push_back(idx.shape()[d]);
  for (int64_t d = axis + 1; d < x.rank(); ++d) s.push_back(x.shape()[d]);
  int64_t ir = idx.rank(), dim = x.shape()[axis];
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t k = saturating_int64(get(idx, i));
    if (k < -dim || k >= dim)
      return im.error(n, "index " + std::to_string(k) + " is out of range for a dim of size " +
                             std::to_string(dim));
  }
  int64_t numel = 1;
  for (int64_t d : s) numel *= d;
  if (numel > kMaxFoldElements) return false;
  return set_output(im, n, gather_by(x, x.dtype(), IVec(s), [&](const IVec& p) {
                      std::vector<int64_t> ip(p.begin() + axis, p.begin() + axis + ir);
                      int64_t k = saturating_int64(get(idx, ravel(ip, idx.shape())));
                      if (k < 0) k += x.shape()[axis];
                      std::vector<int64_t> q(p.begin(), p.begin() + axis);
                      q.push_back(k);
                      q.insert(q.end(), p.begin() + axis + ir, p.end());
                      return ravel(q, x.shape());
                    }));
}

Result<bool> fold_slice(Importer& im, const onnx::NodeProto& n,
                        const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  std::vector<int64_t> starts = to_ints(*in[1]), ends = to_ints(*in[2]), axes, steps;
  if (in.size() > 3 && in[3]) axes = to_ints(*in[3]);
  if (in.size() > 4 && in[4]) steps = to_ints(*in[4]);
  std::vector<int64_t> b(static_cast<size_t>(x.rank()), 0), st(b.size(), 1), s;
  for (int64_t d = 0; d < x.rank(); ++d) s.push_back(x.shape()[d]);
  if ((!axes.empty() && axes.size() != starts.size()) || ends.size() != starts.size() ||
      (!steps.empty() && steps.size() != starts.size()))
    return im.error(n, "starts, ends, axes and steps must have equal lengths");
  for (size_t k = 0; k < starts.size(); ++k) {
    auto ax = checked_axis(im, n, axes.empty() ? static_cast<int64_t>(k) : axes[k], x.rank(),
                           "axes entry");
    HEDDLE_TRY(ax);
    int64_t d = *ax;
    int64_t dim = x.shape()[d], step = steps.empty() ? 1 : steps[k];
    if (step == 0) return im.error(n, "a step is zero");
    if (dim == 0) continue;
    int64_t lo = starts[k] < 0 ? starts[k] + dim : starts[k];
    int64_t hi = ends[k] < 0 ? ends[k] + dim : ends[k];
    if (step > 0) {
      lo = std::clamp<int64_t>(lo, 0, dim);
      hi = std::clamp<int64_t>(hi, 0, dim);
      s[d] = std::max<int64_t>(0, (hi - lo + step - 1) / step);
    } else {
      lo = std::clamp<int64_t>(lo, 0, dim - 1);
      hi = std::clamp<int64_t>(hi, -1, dim - 1);
      s[d] = std::max<int64_t>(0, (lo - hi + (-step) - 1) / (-step));
    }
    b[d] = lo;
    st[d] = step;
  }
  return set_output(im, n, gather_by(x, x.dtype(), IVec(s), [&](const IVec& p) {
                      std::vector<int64_t> q(p.begin(), p.end());
                      for (size_t d = 0; d < q.size(); ++d) q[d] = b[d] + q[d] * st[d];
                      return ravel(q, x.shape());
                    }));
}

Result<bool> fold_expand(Importer& im, const onnx::NodeProto& n,
                         const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  std::vector<int64_t> want = to_ints(*in[1]);
  for (int64_t d : want)
    if (d < 0 || d > kMaxFoldElements) return im.error(n, "'shape' has a bad entry");
  im.rebatch_expand(n, x.shape(), want);
  auto s = bcast_shape({x.shape(), IVec(want)});
  if (!s && im.rebatching() && x.numel() > 0) {
    // A uniform constant made at the exported batch (torch folds an LSTM's zero initial state
    // to [directions, batch, hidden]) expanded to a shape computed at the new batch: the same
    // value at the new shape.
    bool uniform = true;
    for (int64_t i = 1; i < x.numel() && uniform; ++i) uniform = get(x, i) == get(x, 0);
    if (uniform) {
      s = bcast_shape({IVec(std::vector<int64_t>(static_cast<size_t>(x.rank()), 1)), IVec(want)});
      if (s && s->product() <= kMaxFoldElements)
        return set_output(im, n, gather_by(x, x.dtype(), *s, [](const IVec&) { return 0; }));
    }
  }
  if (!s) return im.error(n, "shapes do not broadcast");
  if (s->product() > kMaxFoldElements) return false;
  return set_output(im, n,
                    gather_by(x, x.dtype(), *s, [&](const IVec& p) { return bcast_index(x, p); }));
}

Result<bool> fold_transpose(Importer& im, const onnx::NodeProto& n,
                            const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  std::vector<int64_t> perm = attr_ints(n, "perm");
  if (perm.empty())
    for (int64_t d = x.rank() - 1; d >= 0; --d) perm.push_back(d);
  HEDDLE_TRY(check_perm(im, n, perm, x.rank()));
  std::vector<int64_t> s;
  for (int64_t p : perm) s.push_back(x.shape()[p]);
  return set_output(im, n, gather_by(x, x.dtype(), IVec(s), [&](const IVec& p) {
                      std::vector<int64_t> q(perm.size());
                      for (size_t d = 0; d < perm.size(); ++d) q[perm[d]] = p[d];
                      return ravel(q, x.shape());
                    }));
}

// ScatterND (reduction none) on constants: out = data with the slices that `indices` [..., k]
// address (by their first k coordinates) replaced by `updates`. Swin's shifted-window mask.
Result<bool> fold_scatter_nd(Importer& im, const onnx::NodeProto& n,
                             const std::vector<const Tensor*>& in) {
  const Tensor &data = *in[0], &idx = *in[1], &upd = *in[2];
  if (attr_string(n, "reduction", "none") != "none")
    return im.error(n, "only reduction='none' is supported");
  int64_t k = idx.rank() ? idx.shape()[idx.rank() - 1] : 0;
  if (!idx.is_int() || idx.rank() < 1 || k < 1 || k > data.rank())
    return im.error(n, "'indices' must be integers of shape [..., k], k <= data rank");
  int64_t slice = 1;
  for (int64_t d = k; d < data.rank(); ++d) slice *= data.shape()[d];
  int64_t count = idx.numel() / k;
  if (upd.numel() != count * slice || upd.dtype() != data.dtype())
    return im.error(n, "'updates' must hold one data slice per index");
  Tensor out(data.dtype(), data.shape());
  for (int64_t i = 0; i < data.numel(); ++i) put(out, i, get(data, i));
  for (int64_t j = 0; j < count; ++j) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t c = idx.i64()[j * k + d], size = data.shape()[d];
      if (c < 0) c += size;
      if (c < 0 || c >= size) return im.error(n, "an index is out of range");
      base = base * size + c;
    }
    for (int64_t e = 0; e < slice; ++e) put(out, base * slice + e, get(upd, j * slice + e));
  }
  return set_output(im, n, out);
}

struct FoldRule {
  Folder fold;
  bool needs_constant_inputs;  ///< false: the op folds from its attributes or input types alone
};

// The folders by ONNX op type.
const std::map<std::string, FoldRule>& fold_rules() {
  static const std::map<std::string, FoldRule> rules = {
      {"Add", {fold_binary, true}},
      {"Cast", {fold_cast, true}},
      {"Concat", {fold_concat, true}},
      {"Constant", {fold_constant, false}},
      {"ConstantOfShape", {fold_constant_of_shape, true}},
      {"Div", {fold_binary, true}},
      {"Dropout", {fold_identity, true}},
      {"Equal", {fold_binary, true}},
      {"Expand", {fold_expand, true}},
      {"Gather", {fold_gather, true}},
      {"Greater", {fold_binary, true}},
      {"Identity", {fold_identity, true}},
      {"Less", {fold_binary, true}},
      {"Max", {fold_binary, true}},
      {"Min", {fold_binary, true}},
      {"Mod", {fold_binary, true}},
      {"Mul", {fold_binary, true}},
      {"Neg", {fold_unary, true}},
      {"Not", {fold_unary, true}},
      {"Pow", {fold_binary, true}},
      {"Range", {fold_range, true}},
      {"Reshape", {fold_reshape, true}},
      {"ScatterND", {fold_scatter_nd, true}},
      {"Shape", {fold_shape, false}},
      {"Slice", {fold_slice, true}},
      {"Sqrt", {fold_unary, true}},
      {"Squeeze", {fold_squeeze, true}},
      {"Sub", {fold_binary, true}},
      {"Transpose", {fold_transpose, true}},
      {"Unsqueeze", {fold_squeeze, true}},
      {"Where", {fold_binary, true}},
  };
  return rules;
}

}  // namespace

Result<bool> try_fold(Importer& im, const onnx::NodeProto& n) {
  auto rule = fold_rules().find(n.op_type());
  if (rule == fold_rules().end()) return false;
  std::vector<const Tensor*> in;
  if (rule->second.needs_constant_inputs) {
    for (const auto& name : n.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      const Tensor* t = im.constant(name);
      if (!t) return false;
      in.push_back(t);
    }
    if (in.empty() || !in[0]) return false;
    for (auto* t : in)
      if (t && t->numel() > kMaxFoldElements) return false;
  }
  return rule->second.fold(im, n, in);
}

}  // namespace heddle::onnx_detail
