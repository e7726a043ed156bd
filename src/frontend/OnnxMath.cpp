// ONNX elementwise, activation, contraction (MatMul, Gemm), reduction and normalization nodes,
// each mapped onto the Ops builders.
#include <cctype>
#include <cmath>
#include <map>

#include "OnnxImporter.h"
#include "heddle/support/Numeric.h"

namespace heddle::onnx_detail {

namespace {

// Scalar value of a one-element float/int constant input, if it is one.
std::optional<double> scalar(Importer& im, const std::string& name) {
  const Tensor* t = im.constant(name);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->is_int() ? static_cast<double>(t->i64()[0]) : static_cast<double>(t->f32()[0]);
}

Status unary(Importer& im, const onnx::NodeProto& n, OpKind kind) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  im.set_value(n.output(0), im.ops().unary(kind, *x));
  return {};
}

#define HEDDLE_UNARY(fn, kind) \
  Status fn(Importer& im, const onnx::NodeProto& n) { return unary(im, n, kind); }
HEDDLE_UNARY(relu, OpKind::kRelu)
HEDDLE_UNARY(sigmoid, OpKind::kSigmoid)
HEDDLE_UNARY(tanh_op, OpKind::kTanh)
HEDDLE_UNARY(exp_op, OpKind::kExp)
HEDDLE_UNARY(log_op, OpKind::kLog)
HEDDLE_UNARY(sqrt_op, OpKind::kSqrt)
HEDDLE_UNARY(reciprocal, OpKind::kReciprocal)
HEDDLE_UNARY(neg, OpKind::kNeg)
HEDDLE_UNARY(abs_op, OpKind::kAbs)
HEDDLE_UNARY(gelu, OpKind::kGelu)
#undef HEDDLE_UNARY

Status erf(Importer& im, const onnx::NodeProto& n) {
  return im.error(n,
                  "Erf is supported only inside the Erf-based GELU x * 0.5 * (1 + erf(x / "
                  "sqrt(2))) that torch exports for nn.GELU()");
}

// A scalar operand of a binary op folds into a unary op where one exists; the other operand's
// shape must already be the result shape.
std::optional<ValueId> scalar_binary(Importer& im, const onnx::NodeProto& n, ValueId x,
                                     int const_side, double c) {
  Ops& ops = im.ops();
  if (im.type(n.input(const_side)).rank() > ops.shape(x).size()) return std::nullopt;
  if (!dtype_is_float(ops.type(x).dtype())) return std::nullopt;
  const std::string& op = n.op_type();
  if (op == "Mul") return c == 1.0 ? x : ops.scale(x, c);
  if (op == "Div" && const_side == 1 && c != 0) return c == 1.0 ? x : ops.scale(x, 1.0 / c);
  if ((op == "Add" || op == "Sub") && c == 0.0) return x;
  if (op == "Pow" && const_side == 1) {
    if (c == 1.0) return x;
    if (c == 2.0) return ops.unary(OpKind::kSquare, x);
    if (c == 0.5) return ops.unary(OpKind::kSqrt, x);
    if (c == -1.0) return ops.unary(OpKind::kReciprocal, x);
    if (c == -0.5) return ops.unary(OpKind::kRsqrt, x);
  }
  return std::nullopt;
}

Status binary(Importer& im, const onnx::NodeProto& n) {
  static const std::map<std::string, OpKind> kinds = {
      {"Add", OpKind::kAdd},    {"Sub", OpKind::kSub}, {"Mul", OpKind::kMul},
      {"Div", OpKind::kDiv},    {"Pow", OpKind::kPow}, {"Max", OpKind::kMaximum},
      {"Min", OpKind::kMinimum}};
  if (n.input_size() != 2) return im.error(n, "takes exactly two inputs here");
  for (int side = 0; side < 2; ++side) {
    auto c = scalar(im, n.input(side));
    if (!c || im.constant(n.input(1 - side))) continue;
    // On a Transpose not yet emitted, the unary op runs on the transpose's input and the result
    // stays a transpose, which a MatMul may still read in place (torch's attention scales q
    // after moving its heads forward).
    if (const Entry* t = im.transposed(n.input(1 - side))) {
      const std::vector<int64_t> perm = t->perm;
      if (auto v = scalar_binary(im, n, t->transposed_of, side, *c)) {
        im.set_transposed(n.output(0), *v, perm);
        return {};
      }
    }
    auto x = im.value(n.input(1 - side));
    HEDDLE_TRY(x);
    if (auto v = scalar_binary(im, n, *x, side, *c)) {
      im.set_value(n.output(0), *v);
      return {};
    }
  }
  auto a = im.value(n.input(0));
  HEDDLE_TRY(a);
  auto b = im.value(n.input(1));
  HEDDLE_TRY(b);
  im.set_value(n.output(0), im.ops().binary(kinds.at(n.op_type()), *a, *b));
  return {};
}

Status where(Importer& im, const onnx::NodeProto& n) {
  auto c = im.value(n.input(0));
  HEDDLE_TRY(c);
  auto a = im.value(n.input(1));
  HEDDLE_TRY(a);
  auto b = im.value(n.input(2));
  HEDDLE_TRY(b);
  im.set_value(n.output(0), im.ops().where(*c, *a, *b));
  return {};
}

Status softmax(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  int64_t axis = attr_int(n, "axis", -1);
  Ops& ops = im.ops();
  im.set_value(n.output(0),
               n.op_type() == "Softmax" ? ops.softmax(*x, axis) : ops.log_softmax(*x, axis));
  return {};
}

Status reduce(Importer& im, const onnx::NodeProto& n) {
  static const std::map<std::string, OpKind> kinds = {{"ReduceMean", OpKind::kReduceMean},
                                                      {"ReduceSum", OpKind::kReduceSum},
                                                      {"ReduceMax", OpKind::kReduceMax},
                                                      {"ReduceMin", OpKind::kReduceMin}};
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (n.input_size() > 1 && !n.input(1).empty()) {  // ReduceSum (13+) takes axes as an input
    auto a = im.ints(n, 1, "axes");
    HEDDLE_TRY(a);
    axes = *a;
  }
  if (axes.empty()) {
    if (attr_int(n, "noop_with_empty_axes", 0)) {
      im.set_value(n.output(0), *x);
      return {};
    }
    for (int64_t d = 0; d < im.ops().shape(*x).size(); ++d) axes.push_back(d);
  }
  im.set_value(n.output(0),
               im.ops().reduce(kinds.at(n.op_type()), *x, axes, attr_int(n, "keepdims", 1) != 0));
  return {};
}

// Letters for batch dims of batched matmuls; m, k, n use p, q, r.
constexpr std::string_view kBatchLetters = "abcdefghij";

// Einsum with one or two operands and an explicit output ("BGHID,BGHJD->BGHIJ", maxvit's window
// attention): heddle's einsum, letters renamed to a-z (ONNX allows either case and spaces).
Status einsum(Importer& im, const onnx::NodeProto& n) {
  std::string eq;
  for (char c : attr_string(n, "equation"))
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  if (arrow == std::string::npos || eq.find("...") != std::string::npos)
    return im.error(n, "equation '" + eq + "' needs an explicit output and no ellipsis");
  if (n.input_size() < 1 || n.input_size() > 2)
    return im.error(n, "only one or two operands are supported");
  std::map<char, char> rename;
  std::string spec;
  for (char c : eq) {
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      spec += c;
      continue;
    }
    if (!rename.count(c)) {
      if (rename.size() == 26) return im.error(n, "more than 26 distinct indices");
      rename[c] = static_cast<char>('a' + rename.size());
    }
    spec += rename[c];
  }
  auto a = im.value(n.input(0));
  HEDDLE_TRY(a);
  ValueId b = kNoValue;
  if (n.input_size() == 2) {
    auto bv = im.value(n.input(1));
    HEDDLE_TRY(bv);
    b = *bv;
  }
  im.set_value(n.output(0), im.ops().einsum(spec, *a, b));
  return im.check(n);
}

// Operand `name` of a batched MatMul read with `letters`: its value, or, for a Transpose not yet
// emitted (Importer::set_transposed) when `fold`, the transpose's input with the letters permuted
// to its dims (the result's dim d is the input's dim perm[d]): the einsum reads the input where it
// lies, and no copy is made unless another node asks for the transpose.
Result<std::pair<ValueId, std::string>> matmul_operand(Importer& im, const std::string& name,
                                                       const std::string& letters, bool fold) {
  if (const Entry* t = fold ? im.transposed(name) : nullptr) {
    std::string l(letters.size(), ' ');
    for (size_t d = 0; d < letters.size(); ++d) l[static_cast<size_t>(t->perm[d])] = letters[d];
    return std::pair{t->transposed_of, l};
  }
  auto v = im.value(name);
  HEDDLE_TRY(v);
  return std::pair{*v, letters};
}

Status matmul(Importer& im, const onnx::NodeProto& n) {
  for (int i = 0; i < 2; ++i)
    if (!im.has(n.input(i))) return im.value(n.input(i)).error();  // used before it is defined
  Ops& ops = im.ops();
  IVec sa = im.type(n.input(0)).shape(), sb = im.type(n.input(1)).shape();
  if (sa.size() < 1 || sb.size() < 1) return im.error(n, "operands must have rank >= 1");
  if (sa.size() == 1 || sb.size() == 1)
    return im.error(
        n, "rank-1 operands are not supported; got " + sa.to_string() + " and " + sb.to_string());
  if (sb.size() == 2) {
    auto a = im.value(n.input(0));
    HEDDLE_TRY(a);
    auto b = im.value(n.input(1));
    HEDDLE_TRY(b);
    im.set_value(n.output(0), ops.linear(*a, *b));
    return {};
  }
  // Broadcast batch dims to a common shape, then one einsum.
  int64_t r = std::max(sa.size(), sb.size());
  if (r - 2 > static_cast<int64_t>(kBatchLetters.size())) return im.error(n, "too many batch dims");
  std::vector<int64_t> batch(static_cast<size_t>(r - 2), 1);
  for (const IVec* s : {&sa, &sb})
    for (int64_t d = 0; d < s->size() - 2; ++d) {
      int64_t& o = batch[d + (r - s->size())];
      int64_t v = (*s)[d];
      if (v != 1 && o != 1 && v != o)
        return im.error(
            n, "batch dims of " + sa.to_string() + " and " + sb.to_string() + " do not broadcast");
      o = std::max(o, v);
    }
  const std::string bl(kBatchLetters.substr(0, static_cast<size_t>(r - 2)));
  // An operand already of the common shape is read as it is (a transpose folded in); another is
  // broadcast first.
  auto operand = [&](const std::string& name, const IVec& s,
                     const std::string& mn) -> Result<std::pair<ValueId, std::string>> {
    std::vector<int64_t> want = batch;
    want.push_back(s[s.size() - 2]);
    want.push_back(s[s.size() - 1]);
    const bool whole = IVec(want) == s;
    auto x = matmul_operand(im, name, bl + mn, whole);
    HEDDLE_TRY(x);
    if (!whole) x->first = ops.broadcast(x->first, want);
    return x;
  };
  auto a = operand(n.input(0), sa, "pq");
  HEDDLE_TRY(a);
  auto b = operand(n.input(1), sb, "qr");
  HEDDLE_TRY(b);
  im.set_value(n.output(0),
               ops.einsum(a->second + "," + b->second + "->" + bl + "pr", a->first, b->first));
  return {};
}

Status gemm(Importer& im, const onnx::NodeProto& n) {
  auto a = im.value(n.input(0));
  HEDDLE_TRY(a);
  auto b = im.value(n.input(1));
  HEDDLE_TRY(b);
  Ops& ops = im.ops();
  bool ta = attr_int(n, "transA", 0), tb = attr_int(n, "transB", 0);
  std::string spec = std::string(ta ? "km" : "mk") + "," + (tb ? "nk" : "kn") + "->mn";
  ValueId y = ops.einsum(spec, *a, *b);
  float alpha = attr_float(n, "alpha", 1.0f), beta = attr_float(n, "beta", 1.0f);
  if (alpha != 1.0f) y = ops.scale(y, alpha);
  if (n.input_size() > 2 && !n.input(2).empty() && beta != 0.0f) {
    auto c = im.value(n.input(2));
    HEDDLE_TRY(c);
    ValueId cv = beta == 1.0f ? *c : ops.scale(*c, beta);
    y = ops.add(y, cv);
  }
  im.set_value(n.output(0), y);
  return {};
}

Status layernorm(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  Ops& ops = im.ops();
  int64_t rank = ops.shape(*x).size();
  if (norm_axis(attr_int(n, "axis", -1), rank) != rank - 1)
    return im.error(n, "normalizes from axis " + std::to_string(attr_int(n, "axis", -1)) +
                           "; heddle's layernorm covers the last dim only");
  if (n.output_size() > 1 &&
      (!n.output(1).empty() || (n.output_size() > 2 && !n.output(2).empty())))
    return im.error(n, "the Mean and InvStdDev outputs (training mode) are not supported");
  auto gamma = im.value(n.input(1));
  HEDDLE_TRY(gamma);
  ValueId beta;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    auto b = im.value(n.input(2));
    HEDDLE_TRY(b);
    beta = *b;
  } else {
    Tensor zeros(ops.type(*gamma));
    beta = im.add_param(n.name() + ".bias", ops.type(*gamma), &zeros, false);
  }
  im.set_value(n.output(0), ops.layernorm(*x, *gamma, beta, attr_float(n, "epsilon", 1e-5f)));
  return {};
}

// A rank-0 f32 parameter holding `v` (constants that must meet graph values in a binary op).
ValueId scalar_param(Importer& im, const onnx::NodeProto& n, const std::string& what, double v) {
  Tensor t(DType::kF32, IVec{});
  t.f32()[0] = saturating_float(v);
  return im.add_param((n.name().empty() ? n.output(0) : n.name()) + "." + what,
                      TensorType(DType::kF32, IVec{}), &t, false);
}

// y = min(max(x, lo), hi), either bound optional.
ValueId clamp(Importer& im, const onnx::NodeProto& n, ValueId x, std::optional<double> lo,
              std::optional<double> hi) {
  Ops& ops = im.ops();
  if (lo) x = ops.binary(OpKind::kMaximum, x, scalar_param(im, n, "min", *lo));
  if (hi) x = ops.binary(OpKind::kMinimum, x, scalar_param(im, n, "max", *hi));
  return x;
}

// Clip (ReLU6 exports as Clip(x, 0, 6)); bounds are constant inputs (opset 11+).
Status clip(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  std::optional<double> lo, hi;
  for (int k = 1; k <= 2; ++k) {
    if (n.input_size() <= k || n.input(k).empty()) continue;
    auto v = scalar(im, n.input(k));
    if (!v) return im.error(n, "bounds must be scalar constants");
    (k == 1 ? lo : hi) = *v;
  }
  im.set_value(n.output(0), clamp(im, n, *x, lo, hi));
  return {};
}

// HardSigmoid max(0, min(1, alpha x + beta)); HardSwish x * HardSigmoid(x) with alpha 1/6.
Status hard(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  Ops& ops = im.ops();
  bool swish = n.op_type() == "HardSwish";
  double alpha = swish ? 1.0 / 6.0 : attr_float(n, "alpha", 0.2f);
  double beta = swish ? 0.5 : attr_float(n, "beta", 0.5f);
  ValueId y = ops.add(ops.scale(*x, alpha), scalar_param(im, n, "beta", beta));
  y = clamp(im, n, y, 0.0, 1.0);
  im.set_value(n.output(0), swish ? ops.mul(*x, y) : y);
  return {};
}

}  // namespace

void register_math_ops(std::map<std::string, NodeHandler>& t) {
  t["Relu"] = relu;
  t["Sigmoid"] = sigmoid;
  t["Tanh"] = tanh_op;
  t["Exp"] = exp_op;
  t["Log"] = log_op;
  t["Sqrt"] = sqrt_op;
  t["Reciprocal"] = reciprocal;
  t["Neg"] = neg;
  t["Abs"] = abs_op;
  t["Clip"] = clip;
  t["HardSigmoid"] = hard;
  t["HardSwish"] = hard;
  t["Gelu"] = gelu;  // the fused Erf form (and opset 20's Gelu with approximate="none")
  t["Erf"] = erf;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}) t[op] = binary;
  t["Where"] = where;
  t["Softmax"] = softmax;
  t["LogSoftmax"] = softmax;
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) t[op] = reduce;
  t["MatMul"] = matmul;
  t["Einsum"] = einsum;
  t["Gemm"] = gemm;
  t["LayerNormalization"] = layernorm;
}

}  // namespace heddle::onnx_detail
