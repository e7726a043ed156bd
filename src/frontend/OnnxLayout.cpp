// ONNX layout nodes (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Slice, Split,
// Gather, Expand, Identity, Dropout, Cast, Pad) on graph values; constant cases fold in
// OnnxFold.cpp.
#include <algorithm>
#include <limits>
#include <numeric>

#include "OnnxImporter.h"

namespace heddle::onnx_detail {

namespace {

std::vector<int64_t> dims(const IVec& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// A reshape that keeps the value when the shape does not change.
ValueId reshape_to(Ops& ops, ValueId x, const std::vector<int64_t>& shape) {
  if (x == kNoValue) return x;  // an earlier builder failed; its diagnostic is kept
  return IVec(shape) == ops.shape(x) ? x : ops.reshape(x, shape);
}

Status reshape(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  auto s = reshape_target(im, n, im.ops().shape(*x));
  HEDDLE_TRY(s);
  im.set_value(n.output(0), reshape_to(im.ops(), *x, *s));
  return {};
}

Status flatten(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  IVec s = im.ops().shape(*x);
  if (attr_int(n, "axis", 1) < -s.size() || attr_int(n, "axis", 1) > s.size())
    return im.error(n, "axis is out of range for rank " + std::to_string(s.size()));
  int64_t axis = norm_axis(attr_int(n, "axis", 1), s.size());
  int64_t lo = 1, hi = 1;
  for (int64_t d = 0; d < s.size(); ++d) (d < axis ? lo : hi) *= s[d];
  im.set_value(n.output(0), reshape_to(im.ops(), *x, {lo, hi}));
  return {};
}

Status squeeze_unsqueeze(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (n.input_size() > 1 && !n.input(1).empty()) {
    auto a = im.ints(n, 1, "axes");
    HEDDLE_TRY(a);
    axes = *a;
  }
  auto s = squeezed_shape(im, n, im.ops().shape(*x), axes);
  HEDDLE_TRY(s);
  im.set_value(n.output(0), reshape_to(im.ops(), *x, *s));
  return {};
}

Status transpose(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  std::vector<int64_t> perm = attr_ints(n, "perm");
  int64_t r = im.ops().shape(*x).size();
  if (perm.empty())
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  HEDDLE_TRY(check_perm(im, n, perm, r));
  bool id = true;
  for (int64_t d = 0; d < r; ++d) id &= perm[d] == d;
  if (id)
    im.set_value(n.output(0), *x);
  else
    im.set_transposed(n.output(0), *x, perm);  // emitted on first use, unless a MatMul folds it
  return {};
}

Status concat(Importer& im, const onnx::NodeProto& n) {
  std::vector<ValueId> xs;
  for (const auto& name : n.input()) {
    auto v = im.value(name);
    HEDDLE_TRY(v);
    if (im.ops().type(*v).numel() > 0) xs.push_back(*v);
  }
  if (xs.empty()) return im.error(n, "every input is empty");
  auto axis = checked_axis(im, n, attr_int(n, "axis", 0), im.ops().shape(xs[0]).size());
  HEDDLE_TRY(axis);
  im.set_value(n.output(0), xs.size() == 1 ? xs[0] : im.ops().concat(xs, *axis));
  return {};
}

// A contiguous slice [start, end) along `axis`.
ValueId slice_axis(Ops& ops, ValueId x, int64_t axis, int64_t start, int64_t end) {
  if (x == kNoValue) return x;
  IVec s = ops.shape(x);
  std::vector<int64_t> b(static_cast<size_t>(s.size()), 0), e = dims(s);
  b[axis] = start;
  e[axis] = end;
  return start == 0 && end == s[axis] ? x : ops.slice(x, b, e);
}

// Every `step`-th entry of `x` along `axis`, from the first (swin's x[:, 0::2, 1::2]): the
// entries up to the last full group, reshaped to [groups, step] and cut to column 0, and the
// last entry when the dim is not a multiple of the step.
ValueId every_nth(Ops& ops, ValueId x, int64_t axis, int64_t step) {
  std::vector<int64_t> s = dims(ops.shape(x));
  const int64_t len = s[axis], n = (len + step - 1) / step, full = (n - 1) * step;
  std::vector<ValueId> parts;
  if (n > 1) {
    std::vector<int64_t> lo(s.size(), 0), hi = s;
    hi[axis] = full;
    ValueId head = ops.slice(x, lo, hi);
    std::vector<int64_t> grouped = s;
    grouped[axis] = n - 1;
    grouped.insert(grouped.begin() + axis + 1, step);
    head = ops.reshape(head, grouped);
    std::vector<int64_t> glo(grouped.size(), 0), ghi = grouped;
    ghi[axis + 1] = 1;
    std::vector<int64_t> picked = s;
    picked[axis] = n - 1;
    parts.push_back(ops.reshape(ops.slice(head, glo, ghi), picked));
  }
  std::vector<int64_t> lo(s.size(), 0), hi = s;
  lo[axis] = full;
  hi[axis] = full + 1;
  parts.push_back(ops.slice(x, lo, hi));
  return parts.size() == 1 ? parts[0] : ops.concat(parts, axis);
}

Status slice(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  auto starts = im.ints(n, 1, "starts");
  HEDDLE_TRY(starts);
  auto ends = im.ints(n, 2, "ends");
  HEDDLE_TRY(ends);
  std::vector<int64_t> axes, steps;
  if (n.input_size() > 3 && !n.input(3).empty()) {
    auto a = im.ints(n, 3, "axes");
    HEDDLE_TRY(a);
    axes = *a;
  }
  if (n.input_size() > 4 && !n.input(4).empty()) {
    auto s = im.ints(n, 4, "steps");
    HEDDLE_TRY(s);
    steps = *s;
  }
  IVec s = im.ops().shape(*x);
  std::vector<int64_t> b(static_cast<size_t>(s.size()), 0), e = dims(s);
  std::vector<int64_t> step(static_cast<size_t>(s.size()), 1);
  for (size_t k = 0; k < starts->size(); ++k) {
    if ((!axes.empty() && axes.size() != starts->size()) || ends->size() != starts->size() ||
        (!steps.empty() && steps.size() != starts->size()))
      return im.error(n, "starts, ends, axes and steps must have equal lengths");
    auto ax = checked_axis(im, n, axes.empty() ? static_cast<int64_t>(k) : axes[k], s.size(),
                           "axes entry");
    HEDDLE_TRY(ax);
    int64_t d = *ax;
    if (!steps.empty() && steps[k] < 1)
      return im.error(n, "step " + std::to_string(steps[k]) + " on axis " + std::to_string(d) +
                             " is not supported (positive steps on graph values)");
    int64_t dim = s[d];
    int64_t lo = (*starts)[k] < 0 ? (*starts)[k] + dim : (*starts)[k];
    int64_t hi = (*ends)[k] < 0 ? (*ends)[k] + dim : (*ends)[k];
    b[d] = std::clamp<int64_t>(lo, 0, dim);
    e[d] = std::clamp<int64_t>(hi, b[d], dim);
    if (!steps.empty() && steps[k] > 1) step[d] = steps[k];
  }
  Ops& ops = im.ops();
  ValueId y =
      IVec(b) == IVec(std::vector<int64_t>(b.size(), 0)) && IVec(e) == s ? *x : ops.slice(*x, b, e);
  for (int64_t d = 0; d < s.size(); ++d)
    if (step[d] > 1 && e[d] > b[d]) y = every_nth(ops, y, d, step[d]);
  im.set_value(n.output(0), y);
  return im.check(n);
}

Status split(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  IVec s = im.ops().shape(*x);
  auto ax = checked_axis(im, n, attr_int(n, "axis", 0), s.size());
  HEDDLE_TRY(ax);
  int64_t axis = *ax;
  std::vector<int64_t> sizes = attr_ints(n, "split");
  if (n.input_size() > 1 && !n.input(1).empty()) {
    auto v = im.ints(n, 1, "split");
    HEDDLE_TRY(v);
    sizes = *v;
  }
  int64_t parts = n.output_size();
  if (sizes.empty()) {
    if (s[axis] % parts != 0) return im.error(n, "dim does not split evenly");
    sizes.assign(static_cast<size_t>(parts), s[axis] / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return im.error(n, "'split' has " + std::to_string(sizes.size()) + " entries for " +
                           std::to_string(parts) + " outputs");
  int64_t at = 0;
  for (int64_t v : sizes)
    if (v < 0) return im.error(n, "'split' has a negative size");
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != s[axis])
    return im.error(n, "'split' sizes do not add up to dim " + std::to_string(s[axis]));
  for (int64_t k = 0; k < parts; ++k) {
    im.set_value(n.output(k), slice_axis(im.ops(), *x, axis, at, at + sizes[k]));
    at += sizes[k];
  }
  return {};
}

Status gather(Importer& im, const onnx::NodeProto& n) {
  Ops& ops = im.ops();
  int64_t axis = attr_int(n, "axis", 0);
  const Tensor* idx = im.constant(n.input(1));
  auto data = im.value(n.input(0));
  HEDDLE_TRY(data);
  IVec s = ops.shape(*data);
  auto ax = checked_axis(im, n, axis, s.size());
  HEDDLE_TRY(ax);
  axis = *ax;
  if (!idx) {  // an embedding lookup: ids are a graph value
    if (axis != 0 || s.size() != 2)
      return im.error(n,
                      "a gather with non-constant indices must be an embedding lookup (axis 0 "
                      "of a 2-D table); got data " +
                          s.to_string());
    auto ids = im.value(n.input(1));
    HEDDLE_TRY(ids);
    im.set_value(n.output(0), ops.embedding(*ids, *data));
    return {};
  }
  // Constant indices on a graph value: a contiguous range is a slice (plus a squeeze for a scalar).
  if (!idx->is_int()) return im.error(n, "indices must be integers");
  std::vector<int64_t> k;
  for (int64_t i = 0; i < idx->numel(); ++i) {
    int64_t v = idx->i64()[i];
    k.push_back(v < 0 ? v + s[axis] : v);
  }
  bool range = idx->rank() <= 1;
  for (size_t i = 1; i < k.size() && range; ++i) range = k[i] == k[i - 1] + 1;
  if (!range) {
    // Any constant ids into a 2-D table (position ids [1, seq] into a table whose weights are
    // absent, so the gather did not fold): an embedding lookup of the ids as a parameter.
    bool in_table = axis == 0 && s.size() == 2;
    for (int64_t i = 0; i < idx->numel() && in_table; ++i)
      in_table = idx->i64()[i] >= 0 && idx->i64()[i] < s[0];
    if (!in_table)
      return im.error(n,
                      "constant indices must be a scalar, a contiguous range, or ids in range of "
                      "a 2-D table gathered on axis 0");
    auto ids = im.value(n.input(1));
    HEDDLE_TRY(ids);
    im.set_value(n.output(0), ops.embedding(*ids, *data));
    return {};
  }
  if (k.empty() || k.front() < 0 || k.back() >= s[axis])
    return im.error(n, "indices out of range for dim of size " + std::to_string(s[axis]));
  ValueId y = slice_axis(ops, *data, axis, k.front(), k.back() + 1);
  if (idx->rank() == 0) {
    std::vector<int64_t> out = dims(s);
    out.erase(out.begin() + axis);
    y = reshape_to(ops, y, out);
  }
  im.set_value(n.output(0), y);
  return {};
}

Status expand(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  auto want = im.ints(n, 1, "shape");
  HEDDLE_TRY(want);
  IVec s = im.ops().shape(*x);
  im.rebatch_expand(n, s, *want);
  int64_t r = std::max<int64_t>(s.size(), want->size());
  std::vector<int64_t> out(static_cast<size_t>(r), 1);
  for (int64_t d = 0; d < r; ++d) {
    int64_t a = d - (r - s.size()) >= 0 ? s[d - (r - s.size())] : 1;
    int64_t b = d - (r - static_cast<int64_t>(want->size())) >= 0
                    ? (*want)[d - (r - static_cast<int64_t>(want->size()))]
                    : 1;
    if (a != 1 && b != 1 && a != b) return im.error(n, "shapes do not broadcast");
    out[d] = std::max(a, b);
  }
  im.set_value(n.output(0), IVec(out) == s ? *x : im.ops().broadcast(*x, out));
  return {};
}

Status identity(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  im.set_value(n.output(0), *x);
  return {};
}

Status cast(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  auto dt = dtype_from_onnx(static_cast<int32_t>(attr_int(n, "to", 1)));
  DType have = im.ops().type(*x).dtype();
  if (!dt || dtype_is_float(*dt) != dtype_is_float(have) ||
      (*dt == DType::kBool) != (have == DType::kBool))
    return im.error(n, "casting a graph value between float, integer and bool is not supported");
  im.set_value(n.output(0), *x);  // same storage class: heddle computes floats as fp32
  return {};
}

// `x` cut to [lo, hi) along `axis`.
ValueId cut(Ops& ops, ValueId x, int64_t axis, int64_t lo, int64_t hi) {
  std::vector<int64_t> starts(static_cast<size_t>(ops.shape(x).size()), 0);
  std::vector<int64_t> ends = dims(ops.shape(x));
  starts[axis] = lo;
  ends[axis] = hi;
  return ops.slice(x, starts, ends);
}

// The `width` entries Pad puts before (`front`) or after `x` along `axis`: `value` everywhere
// (constant), the edge entry repeated (edge), or the entries next to the edge mirrored (reflect).
ValueId pad_block(Ops& ops, ValueId x, int64_t axis, int64_t width, bool front,
                  const std::string& mode, double value) {
  int64_t size = ops.shape(x)[axis];
  if (mode == "reflect") {
    std::vector<ValueId> parts;
    for (int64_t k = width; k >= 1; --k) {  // front: x[width], ..., x[1]
      int64_t i = front ? k : size - 1 - (width + 1 - k);
      parts.push_back(cut(ops, x, axis, i, i + 1));
    }
    return parts.size() == 1 ? parts[0] : ops.concat(parts, axis);
  }
  std::vector<int64_t> shape = dims(ops.shape(x));
  shape[axis] = width;
  ValueId edge = ops.broadcast(cut(ops, x, axis, front ? 0 : size - 1, front ? 1 : size), shape);
  return mode == "edge" ? edge : ops.fill_like(edge, value);
}

// Pad (constant, reflect, edge) as slices and concats along each padded axis; negative pads crop.
// All-zero pads (torch's Pad in front of AvgPool2d with count_include_pad) are an identity.
Status pad(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  auto pads = im.ints(n, 1, "pads");
  HEDDLE_TRY(pads);
  Ops& ops = im.ops();
  int64_t r = ops.shape(*x).size();
  if (static_cast<int64_t>(pads->size()) != 2 * r)
    return im.error(n, "'pads' has " + std::to_string(pads->size()) + " entries for a rank-" +
                           std::to_string(r) + " input (needs " + std::to_string(2 * r) + ")");
  if (n.input_size() > 3 && !n.input(3).empty())
    return im.error(n, "the 'axes' input (opset 18) is not supported");
  std::string mode = attr_string(n, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return im.error(n, "mode '" + mode + "' is not supported (constant, reflect, edge are)");
  double value = 0;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Tensor* c = im.constant(n.input(2));
    if (!c || c->numel() != 1) return im.error(n, "'constant_value' must be a constant scalar");
    value = c->is_int() ? static_cast<double>(c->i64()[0]) : c->f32()[0];
  }
  ValueId y = *x;
  for (int64_t d = 0; d < r; ++d) {
    int64_t pb = (*pads)[d], pe = (*pads)[d + r], size = ops.shape(y)[d];
    if (pb < 0 || pe < 0) {
      if (-std::min<int64_t>(pb, 0) - std::min<int64_t>(pe, 0) >= size)
        return im.error(n, "negative pads crop all of dim " + std::to_string(d));
      y = cut(ops, y, d, std::max<int64_t>(-pb, 0), size + std::min<int64_t>(pe, 0));
      size = ops.shape(y)[d];
    }
    if (mode == "reflect" && (pb >= size || pe >= size))
      return im.error(n, "reflect pads of dim " + std::to_string(d) + " must be smaller than " +
                             std::to_string(size));
    std::vector<ValueId> parts;
    if (pb > 0) parts.push_back(pad_block(ops, y, d, pb, true, mode, value));
    parts.push_back(y);
    if (pe > 0) parts.push_back(pad_block(ops, y, d, pe, false, mode, value));
    if (parts.size() > 1) y = ops.concat(parts, d);
    HEDDLE_TRY(im.check(n));
  }
  im.set_value(n.output(0), y);
  return {};
}

}  // namespace

Result<std::vector<int64_t>> squeezed_shape(const Importer& im, const onnx::NodeProto& n,
                                            const IVec& in, std::vector<int64_t> axes) {
  std::vector<int64_t> s = dims(in);
  int64_t r = s.size();
  if (n.op_type() == "Unsqueeze") {
    int64_t out_rank = r + static_cast<int64_t>(axes.size());
    for (auto& a : axes) {
      auto c = checked_axis(im, n, a, out_rank, "axes entry");
      HEDDLE_TRY(c);
      a = *c;
    }
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      return im.error(n, "'axes' repeats an axis");
    for (int64_t a : axes) s.insert(s.begin() + a, 1);
    return s;
  }
  std::vector<bool> drop(static_cast<size_t>(r), axes.empty());
  for (int64_t a : axes) {
    auto c = checked_axis(im, n, a, r, "axes entry");
    HEDDLE_TRY(c);
    drop[*c] = true;
  }
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < r; ++d) {
    if (drop[d] && s[d] != 1 && !axes.empty())
      return im.error(
          n, "cannot squeeze dim " + std::to_string(d) + " of size " + std::to_string(s[d]));
    if (!drop[d] || s[d] != 1) kept.push_back(s[d]);
  }
  return kept;
}

void register_layout_ops(std::map<std::string, NodeHandler>& t) {
  t["Reshape"] = reshape;
  t["Flatten"] = flatten;
  t["Squeeze"] = squeeze_unsqueeze;
  t["Unsqueeze"] = squeeze_unsqueeze;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Slice"] = slice;
  t["Split"] = split;
  t["Gather"] = gather;
  t["Expand"] = expand;
  t["Identity"] = identity;
  t["Dropout"] = identity;
  t["Cast"] = cast;
  t["Pad"] = pad;
}

}  // namespace heddle::onnx_detail
