// Windowed builders: conv2d (stride, padding, dilation, groups) and pooling. Windows live in the
// input projection `(n, ci, s*oh - pad, s*ow - pad)[1, 1, keff, keff]`, so halos follow from it.
#include "OpsUtil.h"
#include "heddle/ops/Ops.h"

namespace heddle {

using namespace ops_detail;

namespace {

// Checks a spatial pair field; fills `out` with 2 values. Empty message on success.
std::string pair_field(const std::vector<int64_t>& v, const char* field, int64_t min,
                       std::vector<int64_t>* out) {
  if (v.size() != 2)
    return std::string("field '") + field + "' must have 2 entries (h, w), got " +
           std::to_string(v.size());
  for (int64_t x : v)
    if (x < min)
      return std::string("field '") + field + "' must be " + (min > 0 ? "positive" : ">= 0") +
             ", got " + std::to_string(x);
  *out = v;
  return "";
}

// Padding as (top, left, bottom, right).
std::string pad_field(const std::vector<int64_t>& v, std::vector<int64_t>* out) {
  if (v.size() != 2 && v.size() != 4)
    return "field 'padding' must have 2 or 4 entries, got " + std::to_string(v.size());
  for (int64_t x : v)
    if (x < 0) return "field 'padding' must be >= 0, got " + std::to_string(x);
  *out = v.size() == 2 ? std::vector<int64_t>{v[0], v[1], v[0], v[1]} : v;
  return "";
}

}  // namespace

ValueId Ops::conv2d(ValueId x, ValueId w, const Conv2dOptions& o) {
  if (bad({x, w})) return kNoValue;
  const IVec &xs = shape(x), &ws = shape(w);
  if (xs.size() != 4 || ws.size() != 4)
    return error("conv2d", "needs x [N, C, H, W] and w [CO, C/groups, KH, KW], got " +
                               type(x).to_string() + " and " + type(w).to_string());
  std::vector<int64_t> st, dil, pad;
  for (auto msg : {pair_field(o.stride, "stride", 1, &st),
                   pair_field(o.dilation, "dilation", 1, &dil), pad_field(o.padding, &pad)})
    if (!msg.empty()) return error("conv2d", msg);
  int64_t G = o.groups, N = xs[0], C = xs[1], CO = ws[0];
  if (G < 1) return error("conv2d", "field 'groups' must be positive, got " + std::to_string(G));
  if (C % G != 0 || CO % G != 0)
    return error("conv2d", "field 'groups' = " + std::to_string(G) +
                               " must divide input channels " + std::to_string(C) +
                               " and output channels " + std::to_string(CO));
  if (ws[1] != C / G)
    return error("conv2d", "weight has " + std::to_string(ws[1]) +
                               " input channels, expected C/groups = " + std::to_string(C / G));
  int64_t keff[2], outs[2];
  for (int i = 0; i < 2; ++i) {
    keff[i] = dil[i] * (ws[2 + i] - 1) + 1;
    int64_t padded = xs[2 + i] + pad[i] + pad[i + 2];
    if (keff[i] > padded)
      return error("conv2d",
                   std::string("kernel ") + (i ? "width " : "height ") + std::to_string(keff[i]) +
                       " (dilated) is larger than the padded input " + std::to_string(padded));
    outs[i] = (padded - keff[i]) / st[i] + 1;
  }
  int64_t cig = C / G, cog = CO / G;
  bool grouped = G > 1;
  std::vector<std::string> names = {"n", "co", "oh", "ow", "ci"};
  std::vector<int64_t> ext = {N, cog, outs[0], outs[1], cig};
  std::vector<std::optional<Monoid>> red = {std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                            Monoid::kSum};
  if (grouped) {
    names.insert(names.begin() + 1, "g");
    ext.insert(ext.begin() + 1, G);
    red.insert(red.begin() + 1, std::nullopt);
  }
  int64_t R = static_cast<int64_t>(names.size());
  auto idx = [&](const char* n) {
    for (int64_t i = 0; i < R; ++i)
      if (names[i] == n) return i;
    return int64_t{-1};
  };
  auto row = [&](std::initializer_list<std::pair<const char*, int64_t>> terms) {
    std::vector<int64_t> r(static_cast<size_t>(R), 0);
    for (auto [n, c] : terms)
      if (idx(n) >= 0) r[idx(n)] = c;
    return r;
  };
  auto xp = make_proj(
      R,
      {row({{"n", 1}}), row({{"g", cig}, {"ci", 1}}), row({{"oh", st[0]}}), row({{"ow", st[1]}})},
      {0, 0, -pad[0], -pad[1]}, {1, 1, keff[0], keff[1]});
  auto wp = make_proj(R, {row({{"g", cog}, {"co", 1}}), row({{"ci", 1}}), row({}), row({})}, {},
                      {1, 1, ws[2], ws[3]});
  auto yp = make_proj(
      R, {row({{"n", 1}}), row({{"g", cog}, {"co", 1}}), row({{"oh", 1}}), row({{"ow", 1}})});
  bool padded = pad[0] || pad[1] || pad[2] || pad[3];
  Op op;
  op.kind = OpKind::kConv2d;
  op.attrs = {{"stride", st}, {"padding", pad}, {"dilation", dil}, {"groups", G}};
  op.space = make_space(names, ext, red);
  op.inputs = {{x, xp, padded}, {w, wp, false}};
  op.results = {{-1, yp, false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec{N, CO, outs[0], outs[1]}));
}

ValueId Ops::pool(OpKind kind, ValueId x, const Pool2dOptions& o) {
  std::string_view name = op_kind_name(kind);
  const IVec& xs = shape(x);
  if (xs.size() != 4) return error(name, "needs x [N, C, H, W], got " + type(x).to_string());
  std::vector<int64_t> k, st, pad;
  for (auto msg : {pair_field(o.kernel, "kernel", 1, &k),
                   pair_field(o.stride.empty() ? o.kernel : o.stride, "stride", 1, &st),
                   pad_field(o.padding, &pad)})
    if (!msg.empty()) return error(name, msg);
  int64_t outs[2];
  for (int i = 0; i < 2; ++i) {
    int64_t padded = xs[2 + i] + pad[i] + pad[i + 2];
    if (k[i] > padded)
      return error(name, "kernel " + std::to_string(k[i]) + " is larger than the padded input " +
                             std::to_string(padded));
    if (pad[i] >= k[i] || pad[i + 2] >= k[i])
      return error(name, "field 'padding' must be smaller than the kernel");
    outs[i] = (padded - k[i]) / st[i] + 1;
  }
  bool padded = pad[0] || pad[1] || pad[2] || pad[3];
  Op op;
  op.kind = kind;
  op.attrs = {{"kernel", k}, {"stride", st}, {"padding", pad}};
  op.space = make_space({"n", "c", "oh", "ow"}, {xs[0], xs[1], outs[0], outs[1]});
  op.inputs = {{x,
                make_proj(4, {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, st[0], 0}, {0, 0, 0, st[1]}},
                          {0, 0, -pad[0], -pad[1]}, {1, 1, k[0], k[1]}),
                padded}};
  op.results = {{-1, identity_proj(4), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec{xs[0], xs[1], outs[0], outs[1]}));
}

ValueId Ops::maxpool2d(ValueId x, const Pool2dOptions& o) {
  if (bad({x})) return kNoValue;
  return pool(OpKind::kMaxPool2d, x, o);
}

ValueId Ops::avgpool2d(ValueId x, const Pool2dOptions& o) {
  if (bad({x})) return kNoValue;
  return pool(OpKind::kAvgPool2d, x, o);
}

ValueId Ops::global_avgpool(ValueId x) {
  if (bad({x})) return kNoValue;
  const IVec& xs = shape(x);
  if (xs.size() != 4)
    return error("global_avgpool", "needs x [N, C, H, W], got " + type(x).to_string());
  Op op;
  op.kind = OpKind::kGlobalAvgPool;
  op.space = make_space({"n", "c", "h", "w"}, xs.values(),
                        {std::nullopt, std::nullopt, Monoid::kSum, Monoid::kSum});
  op.inputs = {{x, identity_proj(4), false}};
  op.results = {{-1, select_proj(4, {0, 1}), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec{xs[0], xs[1]}));
}

}  // namespace heddle
