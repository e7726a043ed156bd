// Fast row kernels of the transformer ops: softmax, log-softmax, layernorm, rmsnorm,
// cross-entropy, their norm_grad derivatives, and rotary embeddings and their gradient. Rows are
// read in place when their window is contiguous (the plain row-major form), else gathered into a
// buffer, so every tiling of an op runs the same float arithmetic; per-row sums and exponentials
// run through the vector loops of Simd.h. Operands with padding go to the reference loops of
// KernelWindow.cpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "KernelUtil.h"
#include "Simd.h"
#include "heddle/ops/CausalOperand.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {
std::atomic<int64_t> passes{0};  // run_norm_grads' passes
}  // namespace

void softmax_probs(const float* x, float* y, int64_t n) {
  const float mx = row_max_simd(x, n);
  row_scale_simd(y, 1.0f / exp_sum_simd(x, y, n, mx), n);
}

float softmax_row(const float* x, float* y, int64_t n, bool log) {
  float mx = row_max_simd(x, n);
  float s = exp_sum_simd(x, y, n, mx);
  float lse = std::log(s);
  if (log) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mx - lse;
  } else {
    row_scale_simd(y, 1.0f / s, n);
  }
  return mx + lse;
}

namespace {

// True when the window of `a` is a contiguous run of its elements.
bool contiguous(const Access& a) {
  for (size_t e = 0; e < a.woff.size(); ++e)
    if (a.woff[e] != static_cast<int64_t>(e)) return false;
  return true;
}

// One row operand: the row at point p in place, or gathered into its buffer.
struct RowIn {
  const Access* a;
  bool direct;
  std::vector<float> buf;
  explicit RowIn(const Access& acc) : a(&acc), direct(contiguous(acc)) {
    if (!direct) buf.resize(static_cast<size_t>(acc.window_size()));
  }
  const float* at(const int64_t* p) {
    int64_t o = a->offset(p);
    if (direct) return a->fdata + o;
    for (size_t e = 0; e < buf.size(); ++e) buf[e] = a->fdata[o + a->woff[e]];
    return buf.data();
  }
};

// Stores row `v` (the window of result access `a` at p) with `mode`; `direct` is contiguous(a),
// computed once per kernel by the caller.
void put_row(const Access& a, bool direct, float* base, const int64_t* p, const float* v,
             Store mode) {
  float* d = base + a.offset(p);
  int64_t n = a.window_size();
  const int64_t* w = a.woff.data();
  if (mode == Store::kAssign) {
    if (direct)
      std::copy(v, v + n, d);
    else
      for (int64_t e = 0; e < n; ++e) d[w[e]] = v[e];
  } else if (mode == Store::kSum) {
    if (direct)
      row_add_to_simd(d, v, n);
    else
      for (int64_t e = 0; e < n; ++e) d[w[e]] += v[e];
  } else {
    for (int64_t e = 0; e < n; ++e) store(mode, d + w[e], v[e]);
  }
}

// Where a row result is computed: straight into the output when its window there is contiguous
// and the kernel overwrites, else into `buf` for put_row.
struct RowOut {
  const Access& a;
  float* base;
  Store mode;
  float* buf;
  bool contig, direct;
  RowOut(const Access& acc, float* b, Store m, float* scratch)
      : a(acc),
        base(b),
        mode(m),
        buf(scratch),
        contig(contiguous(acc)),
        direct(m == Store::kAssign && contig) {}
  float* at(const int64_t* p) const { return direct ? base + a.offset(p) : buf; }
  // Stores the row at p (computed in at(p)) unless it is already in place.
  void put(const int64_t* p, const float* v) const {
    if (!direct) put_row(a, contig, base, p, v, mode);
  }
};

// Where a causal mask's result (input 0 of a softmax, KernelOptions::causal) stops being
// visible along a row: the row's query coordinate and first key coordinate are affine in the
// point; the row is the window over the last tensor dim.
struct VisiblePrefix {
  std::vector<int64_t> cq, ck;  // coefficients of the query and first key coordinates
  int64_t q0 = 0, k0 = 0, shift = 0;
  int64_t length(const int64_t* p, int64_t n) const {
    int64_t q = q0, k = k0;
    for (size_t i = 0; i < cq.size(); ++i) {
      q += cq[i] * p[i];
      k += ck[i] * p[i];
    }
    return std::clamp<int64_t>(q + shift + 1 - k, 0, n);
  }
};

std::optional<VisiblePrefix> visible_prefix(const Op& op, const kernels::CausalOperand* c,
                                            int64_t n) {
  if (c == nullptr || c->result || c->operand != 0 || op.kind != OpKind::kSoftmax)
    return std::nullopt;
  const IndexProjection& p = op.inputs[0].proj;
  const int64_t r = p.tensor_rank();
  if (r < 2 || p.window()[r - 1] != n) return std::nullopt;
  for (int64_t t = 0; t < r - 1; ++t)
    if (p.window()[t] != 1) return std::nullopt;
  VisiblePrefix v;
  v.q0 = p.map().offset()[r - 2];
  v.k0 = p.map().offset()[r - 1];
  v.shift = c->shift;
  for (int64_t k = 0; k < p.index_rank(); ++k) {
    v.cq.push_back(p.map().at(r - 2, k));
    v.ck.push_back(p.map().at(r - 1, k));
  }
  return v;
}

// Mean (0 for rmsnorm) and 1/sqrt(var + eps) of a row (float lane sums of Simd.h).
void moments(const float* x, int64_t n, bool layer, double eps, float* mean, float* rstd) {
  auto dn = static_cast<float>(n);
  float m = layer ? row_sum_simd(x, n) / dn : 0.0f;
  double v = row_sq_dev_simd(x, n, m) / dn;
  *mean = m;
  *rstd = static_cast<float>(1.0 / std::sqrt(v + eps));
}

// The rotary frequency layout: the index dim feeding the last tensor dim with coefficient 2.
int64_t rotary_head_dim(const Op& op) {
  const auto& m = op.inputs[0].proj.map();
  int64_t last = m.out_rank() - 1;
  for (int64_t k = 0; k < m.in_rank(); ++k)
    if (m.at(last, k) == 2) return 2 * op.space.dim(k).extent;
  return 0;
}

Status rotary(const Op& op, const Box& box, std::vector<Access>& ai, const Access& ao, float* out,
              Store mode) {
  double theta = attr_f(op, "theta", 10000.0);
  double sign = op.kind == OpKind::kRotary ? 1.0 : -1.0;
  auto hd = static_cast<double>(rotary_head_dim(op));
  int64_t r = ai[0].t->rank();
  // cos/sin per (position, pair) over the image of the box, computed as the reference does.
  Box img = op.inputs[0].proj.image(box);
  int64_t p0 = img.start()[r - 3], np = img.end()[r - 3] - p0;
  int64_t i0 = img.start()[r - 1] / 2, ni = (img.end()[r - 1] + 1) / 2 - i0;
  std::vector<double> cs(static_cast<size_t>(np * ni)), sn(cs.size());
  const int64_t chunks = attr_i(op, kZigzagAttr, 0);  // positions in zigzag order (ir/Zigzag.h)
  const int64_t seq = op.inputs[0].proj.image(op.space.box()).shape()[r - 3];
  for (int64_t a = 0; a < np; ++a)
    for (int64_t b = 0; b < ni; ++b) {
      double ang = static_cast<double>(zigzag_position(p0 + a, seq, chunks)) *
                   std::pow(theta, -2.0 * static_cast<double>(i0 + b) / hd);
      cs[a * ni + b] = std::cos(ang);
      sn[a * ni + b] = sign * std::sin(ang);
    }
  const AffineMap& m = op.inputs[0].proj.map();
  const Access& x = ai[0];
  // Rows along the last index dim when it walks the pairs (coefficient 2) at one position: the
  // table index, input and output offsets then advance by constants (bitwise the loop below).
  const int64_t k = box.rank() - 1;
  if (mode == Store::kAssign && k >= 0 && m.at(r - 1, k) == 2 && m.at(r - 3, k) == 0 && x.fdata) {
    const int64_t xs = x.coef[k], os = ao.coef[k];
    const int64_t xw0 = x.woff[0], xw1 = x.woff[1], ow0 = ao.woff[0], ow1 = ao.woff[1];
    for_each_row(box, [&](const int64_t* p, int64_t len) {
      int64_t pos = m.offset()[r - 3], pair = m.offset()[r - 1];
      for (int64_t q = 0; q < m.in_rank(); ++q) {
        pos += m.at(r - 3, q) * p[q];
        pair += m.at(r - 1, q) * p[q];
      }
      const double* c = cs.data() + (pos - p0) * ni + pair / 2 - i0;
      const double* sv = sn.data() + (pos - p0) * ni + pair / 2 - i0;
      const float* xi = x.fdata + x.offset(p);
      float* d = out + ao.offset(p);
      for (int64_t j = 0; j < len; ++j) {
        double x0 = xi[j * xs + xw0], x1 = xi[j * xs + xw1];
        d[j * os + ow0] = static_cast<float>(x0 * c[j] - x1 * sv[j]);
        d[j * os + ow1] = static_cast<float>(x0 * sv[j] + x1 * c[j]);
      }
    });
    return {};
  }
  for_each_point(box, [&](const int64_t* p) {
    int64_t pos = m.offset()[r - 3], pair = m.offset()[r - 1];
    for (int64_t k = 0; k < m.in_rank(); ++k) {
      pos += m.at(r - 3, k) * p[k];
      pair += m.at(r - 1, k) * p[k];
    }
    int64_t t = (pos - p0) * ni + pair / 2 - i0;
    int64_t o = x.offset(p);
    double x0 = x.fdata[o + x.woff[0]], x1 = x.fdata[o + x.woff[1]];
    float v[2] = {static_cast<float>(x0 * cs[t] - x1 * sn[t]),
                  static_cast<float>(x0 * sn[t] + x1 * cs[t])};
    put_row(ao, false, out, p, v, mode);
  });
  return {};
}

// One gradient of a layernorm or rmsnorm (norm_grad wrt 0: dx, 1: the scale's, 2: the shift's)
// row by row: what the op's kernel stores of a row of n given the row's dy, x, scale (wrt 0)
// and moments (wrt 0 and 1).
class NormGradRows {
 public:
  NormGradRows(int64_t wrt, bool layer, const Access& ao, float* out, Store mode, int64_t n)
      : wrt_(wrt),
        layer_(layer),
        n_(n),
        ao_(ao),
        out_(out),
        mode_(mode),
        t1_(static_cast<size_t>(std::max<int64_t>(n, 1))),
        t2_(t1_.size()),
        y_(t1_.size()),
        ro_(ao, out, mode, t1_.data()) {}
  int64_t wrt() const { return wrt_; }
  void row(const int64_t* p, const float* d, const float* xr, const float* g, float mean,
           float rstd) {
    if (wrt_ == 2) {
      put_row(ao_, ro_.contig, out_, p, d, mode_);
      return;
    }
    float* xh = y_.data();
    if (wrt_ == 1) {
      if (mode_ == Store::kSum && ro_.contig) {  // summed over the rows straight into the result
        norm_dgamma_simd(d, xr, mean, rstd, out_ + ao_.offset(p), n_);
        return;
      }
      float* r = t1_.data();
      norm_apply_simd(xr, mean, rstd, nullptr, nullptr, xh, n_);
      row_mul_simd(d, xh, r, n_);
      put_row(ao_, ro_.contig, out_, p, r, mode_);
      return;
    }
    float* gy = t2_.data();
    float sum, dot;
    norm_grad_sums_simd(d, g, xr, mean, rstd, gy, xh, n_, &sum, &dot);
    auto dn = static_cast<float>(n_);
    float mgf = layer_ ? sum / dn : 0.0f, mgxf = dot / dn;
    float* r = ro_.at(p);
    norm_dx_simd(gy, xh, rstd, mgf, mgxf, r, n_);
    ro_.put(p, r);
  }

 private:
  int64_t wrt_;
  bool layer_;
  int64_t n_;
  const Access& ao_;
  float* out_;
  Store mode_;
  std::vector<float> t1_, t2_, y_;
  RowOut ro_;
};

// Runs the rows of `box` through each of `grads`, gradients of one norm whose operands are
// `ai` (dy, x[, scale]): each row's dy, x and scale read once, its moments computed once when a
// gradient needs them.
void norm_grad_rows(const Box& box, const std::vector<Access>& ai, bool layer, double eps,
                    int64_t n, const std::vector<NormGradRows*>& grads) {
  RowIn dy(ai[0]), x(ai[1]);
  std::vector<RowIn> gr;
  if (ai.size() > 2) gr.emplace_back(ai[2]);
  bool moments_needed = false, dx = false;
  for (const NormGradRows* r : grads) {
    moments_needed = moments_needed || r->wrt() != 2;
    dx = dx || r->wrt() == 0;
  }
  for_each_point(box, [&](const int64_t* p) {
    const float* d = dy.at(p);
    const float* xr = x.at(p);
    float mean = 0.0f, rstd = 0.0f;
    if (moments_needed) moments(xr, n, layer, eps, &mean, &rstd);
    const float* g = dx && !gr.empty() ? gr[0].at(p) : nullptr;
    for (NormGradRows* r : grads) r->row(p, d, xr, r->wrt() == 0 ? g : nullptr, mean, rstd);
  });
}

}  // namespace

bool run_rows_fast(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, const KernelOptions& o, Status* status) {
  if (!row_op(op.kind)) return false;
  if (o.reference || outs.size() != 1) return false;
  for (size_t i = 0; i < ins.size(); ++i)
    if (op.inputs[i].padded || (ins[i]->is_int() && i != 2 && op.kind != OpKind::kCrossEntropy))
      return false;
  std::string fn = attr_s(op, "fn");
  if (op.kind == OpKind::kNormGrad && fn != "softmax" && fn != "softmax_out" &&
      fn != "log_softmax" && fn != "cross_entropy" && fn != "layernorm" && fn != "rmsnorm")
    return false;
  init_outputs(op, box, outs, o);
  Store mode = store_mode(op);
  std::vector<Access> ai;
  for (size_t i = 0; i < ins.size(); ++i) ai.emplace_back(*ins[i], op.inputs[i]);
  Access ao(*outs[0], op.results[0]);
  float* out = outs[0]->f32();
  double eps = attr_f(op, "eps", 1e-5);
  if (op.kind == OpKind::kRotary || op.kind == OpKind::kRotaryGrad) {
    if (ai[0].window_size() != 2 || ao.window_size() != 2) return false;
    *status = rotary(op, box, ai, ao, out, mode);
    return true;
  }
  // The row length: of x (norm_grad's dy of cross_entropy is one element per row).
  const int64_t n = ai[op.kind == OpKind::kNormGrad ? 1 : 0].window_size();
  std::vector<float> y(static_cast<size_t>(std::max<int64_t>(n, 1))), t1(y.size()), t2(y.size());
  switch (op.kind) {
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: {
      RowIn x(ai[0]);
      bool log = op.kind == OpKind::kLogSoftmax;
      RowOut ro(ao, out, mode, y.data());
      // Rows of a causal mask's result (KernelOptions::causal): past the row's visible prefix
      // the input is -inf, whose weight is exactly 0, so only the prefix is read (the same
      // lanes and sums as the whole row: bitwise the same result).
      const std::optional<VisiblePrefix> vp =
          log || !x.direct ? std::nullopt : visible_prefix(op, o.causal, n);
      for_each_point(box, [&](const int64_t* p) {
        float* yr = ro.at(p);
        const int64_t len = vp ? vp->length(p, n) : n;
        if (len > 0 && len < n) {
          softmax_probs(x.at(p), yr, len);
          std::fill(yr + len, yr + n, 0.0f);
        } else {
          softmax_row(x.at(p), yr, n, log);
        }
        ro.put(p, yr);
      });
      return true;
    }
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: {
      RowIn x(ai[0]);
      std::vector<RowIn> gb;
      for (size_t i = 1; i < ai.size(); ++i) gb.emplace_back(ai[i]);
      bool layer = op.kind == OpKind::kLayerNorm;
      RowOut lo(ao, out, mode, y.data());
      for_each_point(box, [&](const int64_t* p) {
        const float* xr = x.at(p);
        float mean, rstd;
        moments(xr, n, layer, eps, &mean, &rstd);
        float* yr = lo.at(p);
        const float* g = gb.empty() ? nullptr : gb[0].at(p);
        const float* b = gb.size() > 1 ? gb[1].at(p) : nullptr;
        norm_apply_simd(xr, mean, rstd, g, b, yr, n);
        lo.put(p, yr);
      });
      return true;
    }
    case OpKind::kCrossEntropy: {
      RowIn x(ai[0]);
      const bool direct = contiguous(ao);
      for_each_point(box, [&](const int64_t* p) {
        const float* xr = x.at(p);
        auto label = static_cast<int64_t>(ai[1].load(ai[1].offset(p)));
        if (label < 0 || label >= n) {
          if (status->ok())
            *status = Diagnostic("cross_entropy: label " + std::to_string(label) +
                                 " is outside the classes [0, " + std::to_string(n) + ")");
          return;
        }
        float lse = softmax_row(xr, y.data(), n, false);
        float v = lse - xr[label];
        put_row(ao, direct, out, p, &v, mode);
      });
      return true;
    }
    default:
      break;
  }
  // norm_grad: dy, x[, gamma or labels].
  int64_t wrt = attr_i(op, "wrt", 0);
  RowIn dy(ai[0]), x(ai[1]);
  if (fn == "softmax_out") {  // x is the softmax's output y
    RowOut o(ao, out, mode, t1.data());
    for_each_point(box, [&](const int64_t* p) {
      const float* d = dy.at(p);
      const float* yr = x.at(p);
      float sf = row_dot_simd(d, yr, n);
      float* r = o.at(p);
      softmax_grad_simd(d, yr, sf, r, n);
      o.put(p, r);
    });
    return true;
  }
  if (fn == "softmax" || fn == "log_softmax" || fn == "cross_entropy") {
    bool ce = fn == "cross_entropy";
    RowOut o(ao, out, mode, t1.data());
    for_each_point(box, [&](const int64_t* p) {
      const float* d = dy.at(p);
      softmax_probs(x.at(p), y.data(), n);
      float* r = o.at(p);
      if (ce) {
        auto label = static_cast<int64_t>(ai[2].load(ai[2].offset(p)));
        for (int64_t i = 0; i < n; ++i) r[i] = d[0] * y[i];
        if (label >= 0 && label < n) r[label] = d[0] * (y[label] - 1.0f);
      } else if (fn == "softmax") {
        softmax_grad_simd(d, y.data(), row_dot_simd(d, y.data(), n), r, n);
      } else {
        float sf = row_sum_simd(d, n);
        for (int64_t i = 0; i < n; ++i) r[i] = d[i] - y[i] * sf;
      }
      o.put(p, r);
    });
    return true;
  }
  NormGradRows rows(wrt, fn == "layernorm", ao, out, mode, n);
  norm_grad_rows(box, ai, fn == "layernorm", eps, n, {&rows});
  return true;
}

bool run_norm_grads(const std::vector<kernels::BoundCall>& calls, size_t i, const KernelOptions& o,
                    size_t* end, Status* status) {
  if (o.reference || o.accumulate || o.threads > 1) return false;
  const kernels::BoundCall& c0 = calls[i];
  const Op& first = *c0.op;
  const std::string fn = attr_s(first, "fn");
  if (first.kind != OpKind::kNormGrad || (fn != "layernorm" && fn != "rmsnorm") ||
      c0.ins.size() < 2)
    return false;
  for (size_t k = 0; k < c0.ins.size(); ++k)
    if (first.inputs[k].padded || c0.ins[k]->is_int()) return false;
  const double eps = attr_f(first, "eps", 1e-5);
  size_t j = i;
  for (; j < calls.size(); ++j) {
    const Op& op = *calls[j].op;
    if (op.kind != OpKind::kNormGrad || attr_s(op, "fn") != fn || attr_f(op, "eps", 1e-5) != eps ||
        op.inputs != first.inputs || calls[j].ins != c0.ins || calls[j].box != c0.box ||
        calls[j].outs.size() != 1 || calls[j].outs[0]->is_int())
      break;
  }
  if (j - i < 2) return false;
  std::vector<Access> ai;
  for (size_t k = 0; k < c0.ins.size(); ++k) ai.emplace_back(*c0.ins[k], first.inputs[k]);
  const int64_t n = ai[1].window_size();
  if (ai[0].window_size() != n) return false;
  std::vector<Access> ao;
  ao.reserve(j - i);  // the rows keep references to these
  for (size_t q = i; q < j; ++q) {
    ao.emplace_back(*calls[q].outs[0], calls[q].op->results[0]);
    if (ao.back().window_size() != n) return false;
  }
  const bool layer = fn == "layernorm";
  std::vector<std::unique_ptr<NormGradRows>> rows;
  std::vector<NormGradRows*> grads;
  for (size_t q = i; q < j; ++q) {
    const Op& op = *calls[q].op;
    init_outputs(op, c0.box, calls[q].outs, o);
    rows.push_back(std::make_unique<NormGradRows>(attr_i(op, "wrt", 0), layer, ao[q - i],
                                                  calls[q].outs[0]->f32(), store_mode(op), n));
    grads.push_back(rows.back().get());
  }
  norm_grad_rows(c0.box, ai, layer, eps, n, grads);
  passes.fetch_add(1, std::memory_order_relaxed);
  *end = j;
  *status = {};
  return true;
}

}  // namespace heddle::kdetail

namespace heddle::kernels {

int64_t norm_grad_passes() { return kdetail::passes.load(std::memory_order_relaxed); }

}  // namespace heddle::kernels
