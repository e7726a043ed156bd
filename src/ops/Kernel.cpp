// Kernel dispatch and the shared operand-access machinery.
#include "heddle/ops/Kernel.h"

#include "KernelConvForm.h"
#include "KernelParallel.h"
#include "KernelUtil.h"
#include "SharedRows.h"
#include "heddle/ops/Chain.h"
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
  // The window's offsets, row-major, counted like an odometer (an Access is built per kernel call,
  // and per call of a row kernel: no Box or per-element growth of woff).
  const IVec& win = proj->window();
  const int64_t r = win.size();
  woff.resize(static_cast<size_t>(std::max<int64_t>(win.product(), 0)));
  if (woff.empty()) return;
  std::vector<int64_t> e(static_cast<size_t>(r), 0);
  int64_t o = 0;
  for (size_t i = 0;;) {
    woff[i] = o;
    if (++i == woff.size()) break;
    int64_t d = r - 1;
    for (; ++e[d] == win[d]; --d) {  // carry: dim d wraps to 0
      o -= st[d] * (win[d] - 1);
      e[d] = 0;
    }
    o += st[d];
  }
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
    HEDDLE_ASSERT(outs[i]->region().contains(img))
        << "output tile " << outs[i]->to_string() << " misses " << img.to_string();
    fill_box(*outs[i], img, id);
  }
}

void fill_box(Tensor& t, const Box& b, float v) {
  float* d = t.f32();
  const auto& st = t.strides();
  const IVec& org = t.origin();
  const int64_t r = b.rank();
  for_each_row(b, [&](const int64_t* p, int64_t n) {
    int64_t o = 0;
    for (int64_t k = 0; k < r; ++k) o += st[k] * (p[k] - org[k]);
    std::fill(d + o, d + o + n, v);
  });
}

Box unit_stride_last(const Box& box, std::vector<Access>& ai, std::vector<Access>& ao) {
  const int64_t r = box.rank();
  if (r < 2 || ai.empty() || ai[0].coef[r - 1] == 1) return box;
  int64_t u = -1;
  for (int64_t d = 0; d < r - 1 && u < 0; ++d)
    if (ai[0].coef[d] == 1 && box.end()[d] - box.start()[d] > 1) u = d;
  if (u < 0) return box;
  for (const Access& a : ao)
    if (a.coef[u] != 0 && a.coef[u] != 1) return box;
  auto last = [&](std::vector<int64_t> v) {
    std::rotate(v.begin() + u, v.begin() + u + 1, v.end());
    return v;
  };
  for (auto* as : {&ai, &ao})
    for (Access& a : *as) a.coef = last(a.coef);
  return Box(IVec(last(box.start().values())), IVec(last(box.end().values())));
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
  Store s = m == Monoid::kSum ? Store::kSum : m == Monoid::kMax ? Store::kMax : Store::kMin;
  if (dst.origin() == src.origin() && dst.shape() == src.shape()) {
    // Same layout: one flat loop, the same stores.
    float* d = dst.f32();
    const float* v = src.f32();
    for (int64_t i = 0; i < dst.numel(); ++i) store(s, d + i, v[i]);
    return;
  }
  HEDDLE_ASSERT(src.rank() == dst.rank())
      << "combine " << src.to_string() << " into " << dst.to_string();
  // Row by row over the shared region, without allocating: collectives call this on every step.
  float* base = dst.f32();
  const float* from = src.f32();
  kdetail::for_each_shared_row(dst, src, [&](int64_t od, int64_t os, int64_t n) {
    float* d = base + od;
    const float* v = from + os;
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

namespace {

// op.space.box().contains(box), without building the space's box (a check on every call).
bool inside_space(const IndexSpace& space, const Box& box) {
  if (box.rank() != space.rank()) return false;
  if (box.empty()) return true;
  for (int64_t d = 0; d < space.rank(); ++d)
    if (box.start()[d] < 0 || box.end()[d] > space.dim(d).extent) return false;
  return true;
}

}  // namespace

Status run(const Op& op, const Box& box, const std::vector<const Tensor*>& inputs,
           const std::vector<Tensor*>& outputs, const KernelOptions& options) {
  HEDDLE_ASSERT(inputs.size() == op.inputs.size() && outputs.size() == op.results.size())
      << op_kind_name(op.kind) << ": " << inputs.size() << " inputs, " << outputs.size()
      << " outputs";
  HEDDLE_ASSERT(inside_space(op.space, box))
      << "box " << box.to_string() << " outside " << op.space.to_string();
  for (Tensor* t : outputs)
    HEDDLE_ASSERT(!t->is_int()) << op_kind_name(op.kind) << " writes integer tensor";
  if (box.empty()) return {};
  // The verifier's promise, checked where kernels read (debug builds): every input's window over
  // `box` lies in the tile the caller holds (the whole tensor on one device), unless it is padded.
  for (size_t i = 0; i < inputs.size(); ++i)
    HEDDLE_DEBUG_ASSERT(op.inputs[i].padded ||
                        inputs[i]->region().contains(op.inputs[i].proj.image(box)))
        << op_kind_name(op.kind) << " over " << box.to_string() << " reads input " << i << " at "
        << op.inputs[i].proj.image(box).to_string() << ", outside its tensor "
        << inputs[i]->region().to_string();
  if (options.threads > 1 && splittable_kind(op.kind)) {
    // The own loops on the device's threads: slices of the box that write disjoint results.
    if (auto pieces = split_box({&op}, box, options); !pieces.empty()) {
      KernelOptions one = options;
      one.threads = 1;
      return run_pieces(pieces, options,
                        [&](const Box& b) { return run(op, b, inputs, outputs, one); });
    }
  }
  if (chain_fusable(op, options)) {  // elementwise: the fused-chain loop, one op
    run_elementwise(op, box, inputs, outputs);
    return {};
  }
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
    case OpKind::kConcat:
      if (run_concat_fast(op, box, inputs, outputs)) return {};
      break;
    case OpKind::kGlobalAvgPool:
      if (run_global_avgpool_fast(op, box, inputs, outputs, options)) return {};
      break;
    case OpKind::kTopkGating:
      return run_window(op, box, inputs, outputs, options);
    default:
      if (row_op(op.kind)) return run_window(op, box, inputs, outputs, options);
      break;
  }
  if (unit_windows(op)) return run_pointwise(op, box, inputs, outputs, options);
  return run_window(op, box, inputs, outputs, options);
}

}  // namespace kernels

}  // namespace heddle
