// Kernel dispatch and the shared operand-access machinery.
#include "heddle/ops/Kernel.h"

#include "KernelUtil.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace kdetail {

Store store_mode(const Op& op) {
  for (const auto& d : op.space.dims())
    if (d.reduce) {
      switch (*d.reduce) {
        case Monoid::kSum:
          return Store::kSum;
        case Monoid::kMax:
          return Store::kMax;
        case Monoid::kMin:
          return Store::kMin;
      }
    }
  return Store::kAssign;
}

Access::Access(const Tensor& tensor, const Operand& operand)
    : t(&tensor), proj(&operand.proj), padded(operand.padded) {
  if (tensor.is_int())
    idata = tensor.i64();
  else
    fdata = tensor.f32();
  const AffineMap& m = proj->map();
  HEDDLE_ASSERT(m.out_rank() == tensor.rank())
      << "projection " << proj->to_string() << " for tensor " << tensor.to_string();
  const auto& st = tensor.strides();
  base = 0;
  for (int64_t d = 0; d < m.out_rank(); ++d) base += st[d] * (m.offset()[d] - tensor.origin()[d]);
  coef.assign(static_cast<size_t>(m.in_rank()), 0);
  for (int64_t k = 0; k < m.in_rank(); ++k)
    for (int64_t d = 0; d < m.out_rank(); ++d) coef[k] += st[d] * m.at(d, k);
  Box w = Box::of_shape(proj->window());
  for_each_point(w, [&](const int64_t* e) {
    int64_t o = 0;
    for (int64_t d = 0; d < w.rank(); ++d) o += st[d] * e[d];
    woff.push_back(o);
  });
  if (w.rank() == 0) woff = {0};
}

std::vector<int64_t> Access::coords(const int64_t* p) const {
  const AffineMap& m = proj->map();
  std::vector<int64_t> c(m.offset().values());
  for (int64_t d = 0; d < m.out_rank(); ++d)
    for (int64_t k = 0; k < m.in_rank(); ++k) c[d] += m.at(d, k) * p[k];
  return c;
}

bool Access::inside(const std::vector<int64_t>& c, int64_t e) const {
  const IVec& win = proj->window();
  for (int64_t d = win.size() - 1; d >= 0; --d) {
    int64_t x = c[d] + e % win[d];
    e /= win[d];
    if (x < t->origin()[d] || x >= t->origin()[d] + t->shape()[d]) return false;
  }
  return true;
}

void Access::read(const int64_t* p, float* buf, float pad) const {
  int64_t o = offset(p);
  int64_t n = window_size();
  if (!padded) {
    HEDDLE_DEBUG_ASSERT(o >= 0 && o + woff.back() < t->numel()) << "window leaves the tile";
    for (int64_t e = 0; e < n; ++e) buf[e] = load(o + woff[e]);
    return;
  }
  auto c = coords(p);
  for (int64_t e = 0; e < n; ++e) buf[e] = inside(c, e) ? load(o + woff[e]) : pad;
}

void init_outputs(const Op& op, const Box& box, const std::vector<Tensor*>& outs,
                  const KernelOptions& o) {
  Store m = store_mode(op);
  if (m == Store::kAssign || o.accumulate) return;
  float id = m == Store::kSum   ? 0.0f
             : m == Store::kMax ? -std::numeric_limits<float>::infinity()
                                : std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < outs.size(); ++i) {
    Box img = op.results[i].proj.image(box);
    Box b = img.intersect(outs[i]->region());
    HEDDLE_ASSERT(b == img) << "output tile " << outs[i]->to_string() << " misses "
                            << img.to_string();
    Tensor fill = Tensor::tile(outs[i]->dtype(), b);
    fill.fill(id);
    outs[i]->copy_from(fill);
  }
}

bool unit_windows(const Op& op) {
  for (const auto* v : {&op.inputs, &op.results})
    for (const auto& o : *v)
      for (int64_t w : o.proj.window())
        if (w != 1) return false;
  return true;
}

}  // namespace kdetail

namespace kernels {

using namespace kdetail;

float monoid_identity(Monoid m) {
  switch (m) {
    case Monoid::kSum:
      return 0.0f;
    case Monoid::kMax:
      return -std::numeric_limits<float>::infinity();
    case Monoid::kMin:
      return std::numeric_limits<float>::infinity();
  }
  HEDDLE_UNREACHABLE();
}

void combine(Monoid m, Tensor& dst, const Tensor& src) {
  Box b = dst.region().intersect(src.region());
  Store s = m == Monoid::kSum ? Store::kSum : m == Monoid::kMax ? Store::kMax : Store::kMin;
  if (dst.region() == src.region()) {  // same layout: one flat loop, the same stores
    float* d = dst.f32();
    const float* v = src.f32();
    for (int64_t i = 0; i < dst.numel(); ++i) store(s, d + i, v[i]);
    return;
  }
  // Row by row along the last dim, which is contiguous in both tiles.
  const int64_t r = b.rank();
  const auto &ds = dst.strides(), &ss = src.strides();
  const IVec &dorg = dst.origin(), &sorg = src.origin();
  for_each_row(b, [&](const int64_t* p, int64_t n) {
    int64_t od = 0, os = 0;
    for (int64_t d = 0; d < r; ++d) {
      od += ds[d] * (p[d] - dorg[d]);
      os += ss[d] * (p[d] - sorg[d]);
    }
    float* d = dst.f32() + od;
    const float* v = src.f32() + os;
    switch (s) {
      case Store::kSum:
        for (int64_t j = 0; j < n; ++j) d[j] += v[j];
        break;
      default:
        for (int64_t j = 0; j < n; ++j) store(s, d + j, v[j]);
        break;
    }
  });
}

Status run(const Op& op, const Box& box, const std::vector<const Tensor*>& inputs,
           const std::vector<Tensor*>& outputs, const KernelOptions& options) {
  HEDDLE_ASSERT(inputs.size() == op.inputs.size() && outputs.size() == op.results.size())
      << op_kind_name(op.kind) << ": " << inputs.size() << " inputs, " << outputs.size()
      << " outputs";
  HEDDLE_ASSERT(op.space.box().contains(box))
      << "box " << box.to_string() << " outside " << op.space.to_string();
  for (Tensor* t : outputs)
    HEDDLE_ASSERT(!t->is_int()) << op_kind_name(op.kind) << " writes integer tensor";
  if (box.empty()) return {};
  switch (op.kind) {
    case OpKind::kEinsum:
    case OpKind::kEmbedding:
    case OpKind::kEmbeddingGrad:
      return run_contraction(op, box, inputs, outputs, options);
    case OpKind::kConv2d:
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
    case OpKind::kConv2dGradInput:
    case OpKind::kConv2dGradWeight:
    case OpKind::kPool2dGrad:
      return run_conv(op, box, inputs, outputs, options);
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
    case OpKind::kCrossEntropy:
    case OpKind::kNormGrad:
    case OpKind::kRotary:
    case OpKind::kRotaryGrad:
    case OpKind::kTop2Gating:
      return run_window(op, box, inputs, outputs, options);
    default:
      break;
  }
  if (unit_windows(op)) return run_pointwise(op, box, inputs, outputs, options);
  return run_window(op, box, inputs, outputs, options);
}

}  // namespace kernels

}  // namespace heddle
