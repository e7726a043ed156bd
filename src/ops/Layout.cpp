// Layout builders: reshape in the common refinement of both shapes (splits and merges stay
// affine), transpose as a permuted projection, slice as an offset projection, concat as shifted
// padded reads, broadcast as zero rows.
#include <algorithm>
#include <set>

#include "OpsUtil.h"
#include "heddle/ops/Ops.h"

namespace heddle {

using namespace ops_detail;

namespace {

// Suffix products of a shape ignoring size-1 dims: the cut points of its row-major numbering.
std::vector<int64_t> suffix_products(const IVec& s) {
  std::vector<int64_t> p(static_cast<size_t>(s.size()) + 1, 1);
  for (int64_t i = s.size() - 1; i >= 0; --i) p[i] = p[i + 1] * s[i];
  return p;
}

// Rows of the projection of a tensor of shape `s` from the fine dims with cut points `cuts`
// (ascending; fine dim f, numbered major to minor, spans cuts[F-1-f] .. cuts[F-f]).
std::vector<std::vector<int64_t>> refinement_rows(const IVec& s, const std::vector<int64_t>& cuts) {
  int64_t F = static_cast<int64_t>(cuts.size()) - 1;
  auto suf = suffix_products(s);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < s.size(); ++i) {
    std::vector<int64_t> row(static_cast<size_t>(F), 0);
    if (s[i] != 1)
      for (int64_t f = 0; f < F; ++f) {
        int64_t lo = cuts[F - 1 - f], hi = cuts[F - f];
        if (lo >= suf[i + 1] && hi <= suf[i]) row[f] = lo / suf[i + 1];
      }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

ValueId Ops::reshape(ValueId x, std::vector<int64_t> new_shape) {
  if (bad({x})) return kNoValue;
  IVec in = shape(x), out(new_shape);
  for (int64_t e : new_shape)
    if (e < 1)
      return error("reshape", "field 'shape' entries must be positive, got " + out.to_string());
  if (in.product() != out.product())
    return error("reshape", "cannot reshape " + type(x).to_string() + " (" +
                                std::to_string(in.product()) + " elements) to " + out.to_string() +
                                " (" + std::to_string(out.product()) + " elements)");
  std::set<int64_t> cut_set;
  for (auto v : suffix_products(in)) cut_set.insert(v);
  for (auto v : suffix_products(out)) cut_set.insert(v);
  std::vector<int64_t> cuts(cut_set.begin(), cut_set.end());
  bool chain = true;
  for (size_t i = 1; i < cuts.size(); ++i) chain = chain && cuts[i] % cuts[i - 1] == 0;
  Op op;
  op.kind = OpKind::kReshape;
  if (chain) {
    int64_t F = static_cast<int64_t>(cuts.size()) - 1;
    std::vector<int64_t> ext;
    for (int64_t f = 0; f < F; ++f) ext.push_back(cuts[F - f] / cuts[F - 1 - f]);
    op.space = make_space(dim_names(F, "f"), ext);
    op.inputs = {{x, make_proj(F, refinement_rows(in, cuts)), false}};
    op.results = {{-1, make_proj(F, refinement_rows(out, cuts)), false}};
  } else {
    // No common refinement (e.g. [6, 4] -> [4, 6]): one point copies the whole tensor in
    // row-major order.
    op.space = IndexSpace();
    op.inputs = {
        {x, make_proj(0, std::vector<std::vector<int64_t>>(in.size()), {}, in.values()), false}};
    op.results = {
        {-1, make_proj(0, std::vector<std::vector<int64_t>>(out.size()), {}, out.values()), false}};
  }
  return emit1(std::move(op), TensorType(type(x).dtype(), out));
}

ValueId Ops::transpose(ValueId x, std::vector<int64_t> perm) {
  if (bad({x})) return kNoValue;
  const IVec& s = shape(x);
  int64_t r = s.size();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool okp = static_cast<int64_t>(perm.size()) == r;
  for (int64_t i = 0; okp && i < r; ++i) okp = sorted[i] == i;
  if (!okp)
    return error("transpose", "field 'perm' " + IVec(perm).to_string() +
                                  " must be a permutation of 0.." + std::to_string(r - 1));
  std::vector<int64_t> oshape, in_dims(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    oshape.push_back(s[perm[i]]);
    in_dims[perm[i]] = i;
  }
  Op op;
  op.kind = OpKind::kTranspose;
  op.attrs = {{"perm", perm}};
  op.space = make_space(dim_names(r), oshape);
  op.inputs = {{x, select_proj(r, in_dims), false}};
  op.results = {{-1, identity_proj(r), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec(oshape)));
}

ValueId Ops::slice(ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends) {
  if (bad({x})) return kNoValue;
  const IVec& s = shape(x);
  int64_t r = s.size();
  if (static_cast<int64_t>(starts.size()) != r || static_cast<int64_t>(ends.size()) != r)
    return error("slice",
                 "fields 'starts' and 'ends' need one entry per dim of " + type(x).to_string());
  std::vector<int64_t> oshape;
  for (int64_t i = 0; i < r; ++i) {
    if (starts[i] < 0 || starts[i] >= ends[i] || ends[i] > s[i])
      return error("slice", "dim " + std::to_string(i) +
                                ": need 0 <= start < end <= " + std::to_string(s[i]) + ", got " +
                                std::to_string(starts[i]) + ":" + std::to_string(ends[i]));
    oshape.push_back(ends[i] - starts[i]);
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < r; ++i) dims.push_back(i);
  Op op;
  op.kind = OpKind::kSlice;
  op.attrs = {{"starts", starts}, {"ends", ends}};
  op.space = make_space(dim_names(r), oshape);
  op.inputs = {{x, shifted_identity(r, starts), false}};
  op.results = {{-1, identity_proj(r), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec(oshape)));
}

ValueId Ops::concat(const std::vector<ValueId>& xs, int64_t axis) {
  if (failed_) return kNoValue;
  if (xs.empty()) return error("concat", "needs at least one input");
  for (ValueId v : xs)
    if (v == kNoValue) return kNoValue;
  const IVec& s0 = shape(xs[0]);
  int64_t r = s0.size();
  int64_t ax = norm_axis(axis, r);
  if (ax < 0) return error("concat", "field 'axis' = " + std::to_string(axis) + " is out of range");
  std::vector<int64_t> oshape(s0.values());
  oshape[ax] = 0;
  for (ValueId v : xs) {
    const IVec& s = shape(v);
    bool same = s.size() == r && type(v).dtype() == type(xs[0]).dtype();
    for (int64_t i = 0; same && i < r; ++i) same = i == ax || s[i] == s0[i];
    if (!same)
      return error("concat", "inputs " + type(xs[0]).to_string() + " and " + type(v).to_string() +
                                 " differ outside axis " + std::to_string(ax));
    oshape[ax] += s[ax];
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < r; ++i) dims.push_back(i);
  Op op;
  op.kind = OpKind::kConcat;
  op.attrs = {{"axis", ax}};
  op.space = make_space(dim_names(r), oshape);
  int64_t off = 0;
  for (ValueId v : xs) {
    std::vector<int64_t> o(static_cast<size_t>(r), 0);
    o[ax] = -off;
    op.inputs.push_back({v, shifted_identity(r, o), xs.size() > 1});
    off += shape(v)[ax];
  }
  op.results = {{-1, identity_proj(r), false}};
  return emit1(std::move(op), TensorType(type(xs[0]).dtype(), IVec(oshape)));
}

ValueId Ops::broadcast(ValueId x, std::vector<int64_t> target) {
  if (bad({x})) return kNoValue;
  const IVec& s = shape(x);
  int64_t r = static_cast<int64_t>(target.size());
  if (s.size() > r)
    return error("broadcast", "cannot broadcast " + type(x).to_string() + " to lower rank");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < s.size(); ++i) {
    int64_t o = r - s.size() + i;
    if (s[i] != target[o] && s[i] != 1)
      return error("broadcast",
                   "cannot broadcast " + type(x).to_string() + " to " + IVec(target).to_string());
    dims.push_back(s[i] == 1 && target[o] != 1 ? -1 : o);
  }
  Op op;
  op.kind = OpKind::kBroadcast;
  op.space = make_space(dim_names(r), target);
  op.inputs = {{x, select_proj(r, dims), false}};
  op.results = {{-1, identity_proj(r), false}};
  return emit1(std::move(op), TensorType(type(x).dtype(), IVec(target)));
}

}  // namespace heddle
