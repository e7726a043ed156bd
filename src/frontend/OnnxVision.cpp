// ONNX convolution, pooling and batch normalization nodes (NCHW, 2-D).
#include <algorithm>
#include <cmath>

#include "OnnxImporter.h"

namespace heddle::onnx_detail {

namespace {

Status check_2d(Importer& im, const onnx::NodeProto& n, ValueId x) {
  if (im.ops().shape(x).size() != 4)
    return im.error(n, "only 2-D (NCHW) inputs are supported, got " + im.ops().type(x).to_string());
  std::string pad = attr_string(n, "auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID")
    return im.error(n, "auto_pad=" + pad + " is not supported; export with explicit pads");
  return {};
}

// Adds a per-channel vector `b` [C] to `y` [N, C, H, W].
ValueId add_channel(Ops& ops, ValueId y, ValueId b) {
  int64_t c = ops.shape(b)[0];
  return ops.add(y, ops.reshape(b, {c, 1, 1}));
}

Status conv(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  HEDDLE_TRY(check_2d(im, n, *x));
  auto w = im.value(n.input(1));
  HEDDLE_TRY(w);
  Ops& ops = im.ops();
  Conv2dOptions o;
  o.stride = attr_ints(n, "strides", {1, 1});
  o.dilation = attr_ints(n, "dilations", {1, 1});
  o.padding = attr_ints(n, "pads", {0, 0, 0, 0});
  o.groups = attr_int(n, "group", 1);
  ValueId y = ops.conv2d(*x, *w, o);
  HEDDLE_TRY(im.check(n));
  if (n.input_size() > 2 && !n.input(2).empty()) {
    auto b = im.value(n.input(2));
    HEDDLE_TRY(b);
    if (ops.shape(*b).size() != 1 || ops.shape(y)[1] != ops.shape(*b)[0])
      return im.error(n, "bias must be a vector with one entry per output channel, got " +
                             ops.type(*b).to_string());
    y = add_channel(ops, y, *b);
  }
  im.set_value(n.output(0), y);
  return {};
}

// The output size of pooling one spatial dim of size `in` (ONNX and torch): with ceil_mode the
// last window may start inside the end padding or past it, and one starting past the input's
// end plus its begin padding is dropped.
int64_t pool_out(int64_t in, int64_t k, int64_t stride, int64_t pb, int64_t pe, bool ceil) {
  int64_t span = in + pb + pe - k;
  int64_t out = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil && (out - 1) * stride >= in + pb) --out;
  return out;
}

// MaxPool and AveragePool. ceil_mode extends the end padding to hold the last window (max pooling
// ignores padding). Average pooling pools with zero padding divided by the window size, then
// multiplies by window / count per output position, count being the elements each window reads
// of the input and, with count_include_pad=1, of the declared pads (never of the ceil_mode
// extension): torch's divisors.
Status pool(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  HEDDLE_TRY(check_2d(im, n, *x));
  Pool2dOptions o;
  o.kernel = attr_ints(n, "kernel_shape");
  o.stride = attr_ints(n, "strides", o.kernel);
  std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
  for (int64_t d : attr_ints(n, "dilations", {1, 1}))
    if (d != 1) return im.error(n, "dilated pooling is not supported");
  if (o.kernel.size() != 2 || o.stride.size() != 2 || pads.size() != 4)
    return im.error(n, "'kernel_shape', 'strides' and 'pads' must describe 2 spatial dims");
  for (size_t i = 0; i < 2; ++i)
    if (o.kernel[i] < 1 || o.stride[i] < 1 || pads[i] < 0 || pads[i + 2] < 0)
      return im.error(n, "kernel, strides and pads must be positive");
  bool ceil = attr_int(n, "ceil_mode", 0) != 0;
  IVec s = im.ops().shape(*x);
  int64_t outs[2];
  bool exact = true;  // every window's divisor is the kernel size
  o.padding = pads;
  for (int i = 0; i < 2; ++i) {
    if (s[2 + i] + pads[i] + pads[i + 2] < o.kernel[i])
      return im.error(n, "the kernel is larger than the padded input " + s.to_string());
    outs[i] = pool_out(s[2 + i], o.kernel[i], o.stride[i], pads[i], pads[i + 2], ceil);
    int64_t extra = (outs[i] - 1) * o.stride[i] + o.kernel[i] - (s[2 + i] + pads[i] + pads[i + 2]);
    if (extra > 0) {
      o.padding[i + 2] += extra;
      exact = false;
    }
    if (pads[i] || pads[i + 2]) exact = exact && attr_int(n, "count_include_pad", 0) != 0;
  }
  Ops& ops = im.ops();
  if (n.op_type() == "MaxPool") {
    if (n.output_size() > 1 && !n.output(1).empty())
      return im.error(n, "the 'Indices' output is not supported");
    im.set_value(n.output(0), ops.maxpool2d(*x, o));
    return im.check(n);
  }
  ValueId y = ops.avgpool2d(*x, o);
  HEDDLE_TRY(im.check(n));
  if (!exact) {
    bool include = attr_int(n, "count_include_pad", 0) != 0;
    TensorType ft(DType::kF32, IVec{outs[0], outs[1]});
    Tensor f(ft);
    for (int64_t a = 0; a < outs[0]; ++a)
      for (int64_t b = 0; b < outs[1]; ++b) {
        int64_t count = 1;
        for (int i = 0; i < 2; ++i) {
          int64_t lo = (i == 0 ? a : b) * o.stride[i] - pads[i];
          int64_t hi = lo + o.kernel[i];
          int64_t first = include ? -pads[i] : 0, end = s[2 + i] + (include ? pads[i + 2] : 0);
          count *= std::max<int64_t>(1, std::min(hi, end) - std::max(lo, first));
        }
        f.f32()[a * outs[1] + b] = static_cast<float>(o.kernel[0] * o.kernel[1]) / count;
      }
    std::string stem = n.name().empty() ? n.output(0) : n.name();
    y = ops.mul(y, im.add_param(stem + ".divisor", ft, &f, false));
  }
  im.set_value(n.output(0), y);
  return im.check(n);
}

Status global_avgpool(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  HEDDLE_TRY(check_2d(im, n, *x));
  IVec s = im.ops().shape(*x);
  ValueId y = im.ops().global_avgpool(*x);
  im.set_value(n.output(0), im.ops().reshape(y, {s[0], s[1], 1, 1}));
  return {};
}

// Inference batch norm folded to y = x * a + b per channel, a = gamma / sqrt(var + eps),
// b = beta - mean * a; the two vectors become parameters (without data if any input lacks it).
Status batchnorm(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  if (n.output_size() > 1)
    for (int k = 1; k < n.output_size(); ++k)
      if (!n.output(k).empty()) return im.error(n, "training-mode outputs are not supported");
  Ops& ops = im.ops();
  IVec s = ops.shape(*x);
  if (s.size() < 2) return im.error(n, "input must have a channel dim");
  int64_t c = s[1];
  double eps = attr_float(n, "epsilon", 1e-5f);
  std::vector<const Tensor*> p;
  for (int k = 1; k <= 4; ++k) {
    if (!im.has(n.input(k))) return im.error(n, "input " + std::to_string(k) + " is undefined");
    if (im.type(n.input(k)).dtype() != DType::kF32)
      return im.error(n, "input " + std::to_string(k) + " must be a float tensor, got " +
                             im.type(n.input(k)).to_string());
    if (im.type(n.input(k)).numel() != c)
      return im.error(
          n, "input " + std::to_string(k) + " must have " + std::to_string(c) + " elements");
    p.push_back(im.constant(n.input(k)));
  }
  std::vector<int64_t> cshape(static_cast<size_t>(s.size() - 1), 1);
  cshape[0] = c;
  TensorType t(DType::kF32, IVec(cshape));
  bool have = p[0] && p[1] && p[2] && p[3];
  Tensor a(t), b(t);
  if (have)
    for (int64_t i = 0; i < c; ++i) {
      double ai = p[0]->f32()[i] / std::sqrt(static_cast<double>(p[3]->f32()[i]) + eps);
      a.f32()[i] = static_cast<float>(ai);
      b.f32()[i] = static_cast<float>(p[1]->f32()[i] - p[2]->f32()[i] * ai);
    }
  std::string stem = n.name().empty() ? n.output(0) : n.name();
  ValueId av = im.add_param(stem + ".scale", t, have ? &a : nullptr, true);
  ValueId bv = im.add_param(stem + ".shift", t, have ? &b : nullptr, true);
  im.set_value(n.output(0), ops.add(ops.mul(*x, av), bv));
  return {};
}

}  // namespace

void register_vision_ops(std::map<std::string, NodeHandler>& t) {
  t["Conv"] = conv;
  t["MaxPool"] = pool;
  t["AveragePool"] = pool;
  t["GlobalAveragePool"] = global_avgpool;
  t["BatchNormalization"] = batchnorm;
}

}  // namespace heddle::onnx_detail
