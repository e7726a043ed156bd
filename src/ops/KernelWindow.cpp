// Row-wise kernels: each index point reads whole windows (the normalized row) and writes a window:
// softmax, log-softmax, layernorm, rmsnorm, cross-entropy and their gradients, rotary embeddings,
// top-2 gating, and windowed copies and reductions of ops written in window form.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

void write_row(const Access& a, Tensor* t, const int64_t* p, const std::vector<double>& row,
               Store mode) {
  int64_t o = a.offset(p);
  for (size_t e = 0; e < row.size(); ++e)
    store(mode, t->f32() + o + a.woff[e], static_cast<float>(row[e]));
}

std::vector<double> read_row(const Access& a, const int64_t* p, float pad = 0.0f) {
  std::vector<float> buf(static_cast<size_t>(a.window_size()));
  a.read(p, buf.data(), pad);
  return std::vector<double>(buf.begin(), buf.end());
}

void softmax_row(const std::vector<double>& x, std::vector<double>& y, bool log) {
  double mx = -INFINITY;
  for (double v : x) mx = std::max(mx, v);
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  double ls = std::log(s);
  y.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = log ? x[i] - mx - ls : std::exp(x[i] - mx - ls);
}

struct Moments {
  double mean = 0, rstd = 0;
};

Moments layer_moments(const std::vector<double>& x, double eps) {
  double n = static_cast<double>(x.size()), mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= n;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= n;
  return {mean, 1.0 / std::sqrt(var + eps)};
}

double rms_rstd(const std::vector<double>& x, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  return 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + eps);
}

// The rotary frequency layout: the index dim feeding the last tensor dim with coefficient 2.
struct RotaryGeom {
  int64_t head_dim = 0;
  explicit RotaryGeom(const Op& op) {
    const auto& m = op.inputs[0].proj.map();
    int64_t last = m.out_rank() - 1;
    for (int64_t k = 0; k < m.in_rank(); ++k)
      if (m.at(last, k) == 2) head_dim = 2 * op.space.dim(k).extent;
  }
};

// Tokens in order take slots in their k best experts (higher probability first, ties to the lower
// expert index); an expert's slots fill in token order and later tokens are dropped.
Status topk(const Op& op, const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) {
  const Tensor& p = *ins[0];
  Tensor& out = *outs[0];
  Tensor& mask = *outs[1];
  mask.fill(0.0);
  out.fill(0.0);
  const int64_t S = p.shape()[0], E = p.shape()[1], C = attr_i(op, "capacity", 1);
  const auto K = static_cast<size_t>(attr_i(op, "k", 2));
  std::vector<int64_t> count(static_cast<size_t>(E), 0);
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t s = 0; s < S; ++s) {
    const float* row = p.f32() + s * E;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(K), order.end(),
        [row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    double denom = 0;
    for (size_t j = 0; j < K; ++j) denom += row[order[j]];
    for (size_t j = 0; j < K; ++j) {
      const int64_t e = order[j];
      if (count[e] < C) {
        out.f32()[(s * E + e) * C + count[e]] =
            static_cast<float>(denom > 0 ? row[e] / denom : 1.0 / static_cast<double>(K));
        mask.f32()[(s * E + e) * C + count[e]] = 1.0f;
      }
      ++count[e];
    }
  }
  return {};
}

}  // namespace

Status run_window(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o) {
  if (op.kind == OpKind::kTopkGating) return topk(op, ins, outs);
  if (Status fast; run_rows_fast(op, box, ins, outs, o, &fast)) return fast;
  init_outputs(op, box, outs, o);
  Store mode = store_mode(op);
  std::vector<Access> ai;
  for (size_t i = 0; i < ins.size(); ++i) ai.emplace_back(*ins[i], op.inputs[i]);
  Access ao(*outs[0], op.results[0]);
  double eps = attr_f(op, "eps", 1e-5);
  Status status;
  std::vector<double> y;
  const OpCategory cat = op_kind_info(op.kind).category;
  switch (op.kind) {
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
      for_each_point(box, [&](const int64_t* p) {
        softmax_row(read_row(ai[0], p), y, op.kind == OpKind::kLogSoftmax);
        write_row(ao, outs[0], p, y, mode);
      });
      return {};
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
      for_each_point(box, [&](const int64_t* p) {
        auto x = read_row(ai[0], p);
        y.resize(x.size());
        std::vector<double> g, b;
        if (ai.size() > 1) g = read_row(ai[1], p);
        if (ai.size() > 2) b = read_row(ai[2], p);
        Moments m =
            op.kind == OpKind::kLayerNorm ? layer_moments(x, eps) : Moments{0.0, rms_rstd(x, eps)};
        for (size_t i = 0; i < x.size(); ++i) {
          y[i] = (x[i] - m.mean) * m.rstd;
          if (!g.empty()) y[i] *= g[i];
          if (!b.empty()) y[i] += b[i];
        }
        write_row(ao, outs[0], p, y, mode);
      });
      return {};
    case OpKind::kCrossEntropy:
      for_each_point(box, [&](const int64_t* p) {
        auto x = read_row(ai[0], p);
        auto label = static_cast<int64_t>(ai[1].load(ai[1].offset(p)));
        if (label < 0 || label >= static_cast<int64_t>(x.size())) {
          if (status.ok())
            status = Diagnostic("cross_entropy: label " + std::to_string(label) +
                                " is outside the classes [0, " + std::to_string(x.size()) + ")");
          return;
        }
        softmax_row(x, y, true);
        write_row(ao, outs[0], p, {-y[label]}, mode);
      });
      return status;
    case OpKind::kNormGrad: {
      std::string fn = attr_s(op, "fn");
      int64_t wrt = attr_i(op, "wrt", 0);
      for_each_point(box, [&](const int64_t* p) {
        auto dy = read_row(ai[0], p);
        auto x = read_row(ai[1], p);
        size_t n = x.size();
        std::vector<double> d(n, 0.0);
        if (fn == "softmax_out") {  // x is the softmax's output y
          double s = 0;
          for (size_t i = 0; i < n; ++i) s += dy[i] * x[i];
          for (size_t i = 0; i < n; ++i) d[i] = x[i] * (dy[i] - s);
        } else if (fn == "softmax" || fn == "log_softmax") {
          softmax_row(x, y, false);
          double s = 0;
          if (fn == "softmax") {
            for (size_t i = 0; i < n; ++i) s += dy[i] * y[i];
            for (size_t i = 0; i < n; ++i) d[i] = y[i] * (dy[i] - s);
          } else {
            for (size_t i = 0; i < n; ++i) s += dy[i];
            for (size_t i = 0; i < n; ++i) d[i] = dy[i] - y[i] * s;
          }
        } else if (fn == "cross_entropy") {
          auto label = static_cast<int64_t>(ai[2].load(ai[2].offset(p)));
          softmax_row(x, y, false);
          for (size_t i = 0; i < n; ++i)
            d[i] = dy[0] * (y[i] - (static_cast<int64_t>(i) == label ? 1.0 : 0.0));
        } else if (fn == "layernorm" || fn == "rmsnorm") {
          bool ln = fn == "layernorm";
          std::vector<double> g(n, 1.0);
          if (ai.size() > 2) g = read_row(ai[2], p);
          Moments m = ln ? layer_moments(x, eps) : Moments{0.0, rms_rstd(x, eps)};
          std::vector<double> xh(n), gy(n);
          for (size_t i = 0; i < n; ++i) {
            xh[i] = (x[i] - m.mean) * m.rstd;
            gy[i] = dy[i] * g[i];
          }
          if (wrt == 1) {
            for (size_t i = 0; i < n; ++i) d[i] = dy[i] * xh[i];
          } else if (wrt == 2) {
            d = dy;
          } else {
            double mg = 0, mgx = 0, dn = static_cast<double>(n);
            for (size_t i = 0; i < n; ++i) {
              mg += gy[i];
              mgx += gy[i] * xh[i];
            }
            mg /= dn;
            mgx /= dn;
            for (size_t i = 0; i < n; ++i) d[i] = m.rstd * (gy[i] - (ln ? mg : 0.0) - xh[i] * mgx);
          }
        } else if (status.ok()) {
          status = Diagnostic("norm_grad: unknown fn '" + fn + "'");
        }
        write_row(ao, outs[0], p, d, mode);
      });
      return status;
    }
    case OpKind::kRotary:
    case OpKind::kRotaryGrad: {
      double theta = attr_f(op, "theta", 10000.0);
      double sign = op.kind == OpKind::kRotary ? 1.0 : -1.0;
      RotaryGeom geo(op);
      int64_t r = ai[0].t->rank();
      const int64_t chunks = attr_i(op, kZigzagAttr, 0);
      const int64_t seq = op.inputs[0].proj.image(op.space.box()).shape()[r - 3];
      for_each_point(box, [&](const int64_t* p) {
        auto x = read_row(ai[0], p);
        auto c = ai[0].coords(p);
        double pos = static_cast<double>(zigzag_position(c[r - 3], seq, chunks));
        double i = static_cast<double>(c[r - 1] / 2);
        double ang = pos * std::pow(theta, -2.0 * i / static_cast<double>(geo.head_dim));
        double cs = std::cos(ang), sn = sign * std::sin(ang);
        write_row(ao, outs[0], p, {x[0] * cs - x[1] * sn, x[0] * sn + x[1] * cs}, mode);
      });
      return {};
    }
    default:
      break;
  }
  if (cat == OpCategory::kReduction) {
    // Window form: each point reduces its whole input window (e.g. global_avgpool written as
    // `%x(n, c, 0, 0)[1, 1, H, W]`); a mean divides by window volume times reduce extents.
    double count = static_cast<double>(ai[0].window_size());
    for (const auto& d : op.space.dims())
      if (d.reduce) count *= static_cast<double>(d.extent);
    bool mean = op.kind == OpKind::kReduceMean || op.kind == OpKind::kGlobalAvgPool;
    Store inner = op.kind == OpKind::kReduceMax   ? Store::kMax
                  : op.kind == OpKind::kReduceMin ? Store::kMin
                                                  : Store::kSum;
    float init = inner == Store::kMax ? -INFINITY : inner == Store::kMin ? INFINITY : 0.0f;
    Store outer = mode == Store::kAssign ? Store::kAssign : inner;
    for_each_point(box, [&](const int64_t* p) {
      auto x = read_row(ai[0], p);
      float acc = init;
      for (double v : x) store(inner, &acc, static_cast<float>(v));
      if (mean) acc = static_cast<float>(std::accumulate(x.begin(), x.end(), 0.0) / count);
      store(outer, outs[0]->f32() + ao.offset(p), acc);
    });
    return {};
  }
  if (cat == OpCategory::kLayout && ins.size() == 1 && ai[0].window_size() == ao.window_size()) {
    // Window copy in row-major order (reshape without a common refinement).
    for_each_point(box,
                   [&](const int64_t* p) { write_row(ao, outs[0], p, read_row(ai[0], p), mode); });
    return {};
  }
  return Diagnostic("no kernel for op '" + std::string(op_kind_name(op.kind)) +
                    "' in this form (windowed operands)");
}

}  // namespace heddle::kdetail
