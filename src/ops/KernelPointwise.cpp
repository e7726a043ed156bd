// Pointwise kernels: every op whose operands have unit windows (elementwise, reductions over
// reduce dims, layout copies, elementwise gradients, optimizer updates). One generic loop; per
// kind only the scalar function differs.
#include <cmath>

#include "KernelUtil.h"
#include "Scalar.h"

namespace heddle::kdetail {

namespace {

// Global coordinate (row `row` of result 0's projection) at row start p, offset j.
int64_t out_coord(const Op& op, int64_t row, const int64_t* p, int64_t j) {
  const AffineMap& m = op.results[0].proj.map();
  int64_t c = m.offset()[row];
  for (int64_t k = 0; k < m.in_rank(); ++k) c += m.at(row, k) * p[k];
  if (m.in_rank()) c += m.at(row, m.in_rank() - 1) * j;
  return c;
}

// True when the causal mask hides the result element at (p, j): key index > query index,
// aligned at the end when the key dim is longer.
struct CausalMask {
  const Op& op;
  int64_t rq, rk, shift;
  explicit CausalMask(const Op& o) : op(o) {
    const auto& proj = o.results[0].proj;
    int64_t r = proj.tensor_rank();
    rq = r - 2;
    rk = r - 1;
    IVec ext = proj.image(o.space.box()).shape();
    shift = ext[rk] - ext[rq];
  }
  bool hidden(const int64_t* p, int64_t j) const {
    return out_coord(op, rk, p, j) > out_coord(op, rq, p, j) + shift;
  }
};

double reduce_count(const Op& op) {
  double n = 1;
  for (const auto& d : op.space.dims())
    if (d.reduce) n *= static_cast<double>(d.extent);
  return n;
}

}  // namespace

Status run_pointwise(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs, const KernelOptions& o) {
  init_outputs(op, box, outs, o);
  Store mode = store_mode(op);
  OpKind k = op.kind;
  const OpCategory cat = op_kind_info(k).category;
  if (k == OpKind::kCausalMask) {
    CausalMask cm(op);
    pointwise(op, box, ins, outs, mode,
              [&](const float* in, float* out, const int64_t* p, int64_t j) {
                out[0] = cm.hidden(p, j) ? -std::numeric_limits<float>::infinity() : in[0];
              });
    return {};
  }
  if (k == OpKind::kFill) {
    auto value = static_cast<float>(attr_f(op, "value", 0.0));
    pointwise(op, box, ins, outs, mode,
              [&](const float*, float* out, const int64_t*, int64_t) { out[0] = value; });
    return {};
  }
  if (k == OpKind::kRelu) {  // the common case, kept free of the per-element kind switch
    pointwise(op, box, ins, outs, mode, [](const float* in, float* out, const int64_t*, int64_t) {
      out[0] = in[0] > 0.0f ? in[0] : 0.0f;
    });
    return {};
  }
  if (cat == OpCategory::kUnary) {
    double alpha = attr_f(op, "alpha", 1.0);
    pointwise(op, box, ins, outs, mode, [&](const float* in, float* out, const int64_t*, int64_t) {
      out[0] = static_cast<float>(unary_value(k, in[0], alpha));
    });
    return {};
  }
  if (cat == OpCategory::kBinary && k != OpKind::kElementwiseGrad) {
    pointwise(op, box, ins, outs, mode, [&](const float* in, float* out, const int64_t*, int64_t) {
      out[0] = static_cast<float>(binary_value(k, in[0], in[1]));
    });
    return {};
  }
  switch (k) {
    case OpKind::kWhere:
      pointwise(op, box, ins, outs, mode, [](const float* in, float* out, const int64_t*, int64_t) {
        out[0] = in[0] != 0.0f ? in[1] : in[2];
      });
      return {};
    case OpKind::kElementwiseGrad: {
      auto fk = parse_op_kind(attr_s(op, "fn"));
      if (!fk) return Diagnostic("elementwise_grad: unknown fn '" + attr_s(op, "fn") + "'");
      OpKind f = *fk;
      int wrt = static_cast<int>(attr_i(op, "wrt", 0));
      double alpha = attr_f(op, "alpha", 1.0);
      OpCategory fc = op_kind_info(f).category;
      if (f == OpKind::kCausalMask) {
        CausalMask cm(op);
        pointwise(op, box, ins, outs, mode,
                  [&](const float* in, float* out, const int64_t* p, int64_t j) {
                    out[0] = cm.hidden(p, j) ? 0.0f : in[0];
                  });
      } else if (fc == OpCategory::kUnary) {
        pointwise(op, box, ins, outs, mode,
                  [&](const float* in, float* out, const int64_t*, int64_t) {
                    out[0] = static_cast<float>(in[0] * unary_deriv(f, in[1], alpha));
                  });
      } else if (fc == OpCategory::kBinary) {
        pointwise(op, box, ins, outs, mode,
                  [&](const float* in, float* out, const int64_t*, int64_t) {
                    out[0] = static_cast<float>(in[0] * binary_deriv(f, in[1], in[2], wrt));
                  });
      } else if (f == OpKind::kWhere) {
        pointwise(op, box, ins, outs, mode,
                  [&](const float* in, float* out, const int64_t*, int64_t) {
                    bool c = in[1] != 0.0f;
                    out[0] = (wrt == 1) == c ? in[0] : 0.0f;
                  });
      } else if (f == OpKind::kReduceMax || f == OpKind::kReduceMin) {
        pointwise(op, box, ins, outs, mode,
                  [&](const float* in, float* out, const int64_t*, int64_t) {
                    out[0] = in[1] == in[2] ? in[0] : 0.0f;
                  });
      } else {
        return Diagnostic("elementwise_grad: no local derivative for fn '" + attr_s(op, "fn") +
                          "'");
      }
      return {};
    }
    case OpKind::kReduceMean:
    case OpKind::kGlobalAvgPool: {
      auto inv = static_cast<float>(1.0 / reduce_count(op));
      pointwise(
          op, box, ins, outs, mode,
          [&](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0] * inv; });
      return {};
    }
    case OpKind::kConcat:
    case OpKind::kEinsum:
    case OpKind::kConv2dGradWeight: {
      // concat: exactly one input is in bounds (the others read zero); einsum fallback and the
      // weight gradient: the product of the operands.
      bool sum = k == OpKind::kConcat;
      size_t n = ins.size();
      pointwise(op, box, ins, outs, mode,
                [&](const float* in, float* out, const int64_t*, int64_t) {
                  float v = in[0];
                  for (size_t i = 1; i < n; ++i) v = sum ? v + in[i] : v * in[i];
                  out[0] = v;
                });
      return {};
    }
    case OpKind::kSgdMomentum: {
      auto lr = static_cast<float>(attr_f(op, "lr", 0.01));
      auto mu = static_cast<float>(attr_f(op, "momentum", 0.9));
      auto wd = static_cast<float>(attr_f(op, "weight_decay", 0.0));
      pointwise(op, box, ins, outs, Store::kAssign,
                [&](const float* in, float* out, const int64_t*, int64_t) {
                  float g = in[1] + wd * in[0];
                  float v = mu * in[2] + g;
                  out[0] = in[0] - lr * v;
                  out[1] = v;
                });
      return {};
    }
    case OpKind::kAdamW: {
      double lr = attr_f(op, "lr", 1e-3), b1 = attr_f(op, "beta1", 0.9),
             b2 = attr_f(op, "beta2", 0.999), eps = attr_f(op, "eps", 1e-8),
             wd = attr_f(op, "weight_decay", 0.01);
      int64_t step = o.optimizer_step > 0 ? o.optimizer_step : attr_i(op, "step", 1);
      double c1 = 1.0 - std::pow(b1, static_cast<double>(step));
      double c2 = 1.0 - std::pow(b2, static_cast<double>(step));
      pointwise(op, box, ins, outs, Store::kAssign,
                [&](const float* in, float* out, const int64_t*, int64_t) {
                  double p = in[0], g = in[1];
                  double m = b1 * in[2] + (1 - b1) * g;
                  double v = b2 * in[3] + (1 - b2) * g * g;
                  double upd = (m / c1) / (std::sqrt(v / c2) + eps) + wd * p;
                  out[0] = static_cast<float>(p - lr * upd);
                  out[1] = static_cast<float>(m);
                  out[2] = static_cast<float>(v);
                });
      return {};
    }
    default:
      break;
  }
  if (cat == OpCategory::kReduction || cat == OpCategory::kLayout) {
    pointwise(op, box, ins, outs, mode,
              [](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0]; });
    return {};
  }
  return Diagnostic("no pointwise kernel for op '" + std::string(op_kind_name(k)) + "'");
}

}  // namespace heddle::kdetail
