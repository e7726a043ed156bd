// Pointwise kernels: every op whose operands have unit windows (elementwise, reductions over
// reduce dims, layout copies, elementwise gradients, optimizer updates). One generic loop; per
// kind only the scalar function differs.
#include <cmath>

#include "KernelPointwiseFast.h"
#include "KernelUtil.h"
#include "Scalar.h"
#include "Simd.h"

namespace heddle::kdetail {

namespace {

// reduce_sum over every dim but one, which x and y both walk contiguously (a bias's gradient,
// y[c] = sum over a, b of x[a, b, c]; unit_stride_last moves that dim last): each row of x is
// added into y in the box's order, eight floats at a time. The generic loop sums the same terms in
// the same order, but its per-row setup cost more than a 256-float row's adds (129 us for
// [8, 128, 256], bench_ops --reduce); false (nothing written) otherwise.
bool column_sums(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                 const std::vector<Tensor*>& outs, Store mode) {
  if (op.kind != OpKind::kReduceSum || mode != Store::kSum || ins.size() != 1 || outs.size() != 1 ||
      box.rank() < 2 || ins[0]->is_int() || outs[0]->is_int() || op.inputs[0].padded)
    return false;
  std::vector<Access> ai = {Access(*ins[0], op.inputs[0])}, ao = {Access(*outs[0], op.results[0])};
  const Box b = unit_stride_last(box, ai, ao);
  const int64_t last = b.rank() - 1;
  const Access &x = ai[0], &y = ao[0];
  if (x.coef[last] != 1 || y.coef[last] != 1) return false;
  for (int64_t d = 0; d < last; ++d)
    if (y.coef[d] != 0) return false;
  const int64_t n = b.end()[last] - b.start()[last];
  std::vector<int64_t> e(b.end().values());
  e[last] = b.start()[last] + 1;
  float* yr = outs[0]->f32() + y.offset(b.start().values().data());
  for_each_point(Box(b.start(), IVec(e)),
                 [&](const int64_t* p) { row_add_to_simd(yr, x.fdata + x.offset(p), n); });
  return true;
}

// AdamW over rows where every operand is contiguous along the last index dim (in float, through
// the vector loop of Simd.h; the reference computes in double), trailing dims merged where every
// operand walks them regularly (a [CO, CI, 1, 1] weight is one row); false (nothing written)
// otherwise.
bool adamw_rows(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                const std::vector<Tensor*>& outs, double lr, double b1, double b2, double eps,
                double wd, double c1, double c2) {
  if (ins.size() != 4 || outs.size() != 3 || box.rank() == 0) return false;
  std::vector<Access> a;
  for (size_t i = 0; i < 4; ++i) {
    if (ins[i]->is_int() || op.inputs[i].padded) return false;
    a.emplace_back(*ins[i], op.inputs[i]);
  }
  for (size_t i = 0; i < 3; ++i) a.emplace_back(*outs[i], op.results[i]);
  int64_t last = box.rank() - 1;
  for (const auto& x : a)
    if (x.coef[last] != 1) return false;
  auto f = [](double x) { return static_cast<float>(x); };
  const AdamWStep step{f(lr), f(b1), f(b2), f(eps), f(wd), f(c1), f(c2)};
  for_each_merged_row(box, a, [&](const int64_t* p, int64_t n) {
    const float *P = a[0].fdata + a[0].offset(p), *G = a[1].fdata + a[1].offset(p),
                *M = a[2].fdata + a[2].offset(p), *V = a[3].fdata + a[3].offset(p);
    float *OP = outs[0]->f32() + a[4].offset(p), *OM = outs[1]->f32() + a[5].offset(p),
          *OV = outs[2]->f32() + a[6].offset(p);
    adamw_simd(step, P, G, M, V, OP, OM, OV, n);
  });
  return true;
}

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
  const bool fast = !o.reference;
  if (fast &&
      (run_channel_reduce(op, box, ins, outs, mode) || column_sums(op, box, ins, outs, mode)))
    return {};
  if (k == OpKind::kCausalMask) {
    CausalMask cm(op);
    pointwise(
        op, box, ins, outs, mode,
        [&](const float* in, float* out, const int64_t* p, int64_t j) {
          out[0] = cm.hidden(p, j) ? -std::numeric_limits<float>::infinity() : in[0];
        },
        fast);
    return {};
  }
  if (k == OpKind::kFill) {
    auto value = static_cast<float>(attr_f(op, "value", 0.0));
    pointwise(
        op, box, ins, outs, mode,
        [&](const float*, float* out, const int64_t*, int64_t) { out[0] = value; }, fast, {},
        kMergeRows);
    return {};
  }
  if (k == OpKind::kRelu) {  // the common case, kept free of the per-element kind switch
    pointwise(
        op, box, ins, outs, mode,
        [](const float* in, float* out, const int64_t*, int64_t) {
          out[0] = in[0] > 0.0f ? in[0] : 0.0f;
        },
        fast, {}, kMergeRows);
    return {};
  }
  if (cat == OpCategory::kUnary) {
    double alpha = attr_f(op, "alpha", 1.0);
    if (fast && unary_fast(k, op, box, ins, outs, mode, alpha, false)) return {};
    pointwise(
        op, box, ins, outs, mode,
        [&](const float* in, float* out, const int64_t*, int64_t) {
          out[0] = static_cast<float>(unary_value(k, in[0], alpha));
        },
        fast, {}, kMergeRows);
    return {};
  }
  if (cat == OpCategory::kBinary && k != OpKind::kElementwiseGrad) {
    if (fast && binary_fast(k, op, box, ins, outs, mode)) return {};
    pointwise(
        op, box, ins, outs, mode,
        [&](const float* in, float* out, const int64_t*, int64_t) {
          out[0] = static_cast<float>(binary_value(k, in[0], in[1]));
        },
        fast, {}, kMergeRows);
    return {};
  }
  switch (k) {
    case OpKind::kWhere:
      pointwise(
          op, box, ins, outs, mode,
          [](const float* in, float* out, const int64_t*, int64_t) {
            out[0] = in[0] != 0.0f ? in[1] : in[2];
          },
          fast, {}, kMergeRows);
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
        pointwise(
            op, box, ins, outs, mode,
            [&](const float* in, float* out, const int64_t* p, int64_t j) {
              out[0] = cm.hidden(p, j) ? 0.0f : in[0];
            },
            fast);
      } else if (fast && fc == OpCategory::kUnary &&
                 unary_fast(f, op, box, ins, outs, mode, alpha, true)) {
      } else if (fast && fc == OpCategory::kBinary &&
                 binary_grad_fast(f, wrt, op, box, ins, outs, mode)) {
      } else if (fc == OpCategory::kUnary) {
        pointwise(
            op, box, ins, outs, mode,
            [&](const float* in, float* out, const int64_t*, int64_t) {
              out[0] = static_cast<float>(in[0] * unary_deriv(f, in[1], alpha));
            },
            fast, {}, kMergeRows);
      } else if (fc == OpCategory::kBinary) {
        pointwise(
            op, box, ins, outs, mode,
            [&](const float* in, float* out, const int64_t*, int64_t) {
              out[0] = static_cast<float>(in[0] * binary_deriv(f, in[1], in[2], wrt));
            },
            fast, {}, kMergeRows);
      } else if (f == OpKind::kWhere) {
        pointwise(
            op, box, ins, outs, mode,
            [&](const float* in, float* out, const int64_t*, int64_t) {
              bool c = in[1] != 0.0f;
              out[0] = (wrt == 1) == c ? in[0] : 0.0f;
            },
            fast, {}, kMergeRows);
      } else if (f == OpKind::kReduceMax || f == OpKind::kReduceMin) {
        pointwise(
            op, box, ins, outs, mode,
            [&](const float* in, float* out, const int64_t*, int64_t) {
              out[0] = in[1] == in[2] ? in[0] : 0.0f;
            },
            fast, {}, kMergeRows);
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
          [&](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0] * inv; }, fast,
          {}, kMergeRows);
      return {};
    }
    case OpKind::kConcat:
    case OpKind::kEinsum:
    case OpKind::kConv2dGradWeight: {
      // concat: exactly one input is in bounds (the others read zero); einsum fallback and the
      // weight gradient: the product of the operands.
      bool sum = k == OpKind::kConcat;
      size_t n = ins.size();
      pointwise(
          op, box, ins, outs, mode,
          [&](const float* in, float* out, const int64_t*, int64_t) {
            float v = in[0];
            for (size_t i = 1; i < n; ++i) v = sum ? v + in[i] : v * in[i];
            out[0] = v;
          },
          fast, {}, kMergeRows);
      return {};
    }
    case OpKind::kSgdMomentum: {
      auto lr = static_cast<float>(attr_f(op, "lr", 0.01));
      auto mu = static_cast<float>(attr_f(op, "momentum", 0.9));
      auto wd = static_cast<float>(attr_f(op, "weight_decay", 0.0));
      pointwise(
          op, box, ins, outs, Store::kAssign,
          [&](const float* in, float* out, const int64_t*, int64_t) {
            float g = in[1] + wd * in[0];
            float v = mu * in[2] + g;
            out[0] = in[0] - lr * v;
            out[1] = v;
          },
          fast, {}, kMergeRows);
      return {};
    }
    case OpKind::kAdamW: {
      double lr = attr_f(op, "lr", 1e-3), b1 = attr_f(op, "beta1", 0.9),
             b2 = attr_f(op, "beta2", 0.999), eps = attr_f(op, "eps", 1e-8),
             wd = attr_f(op, "weight_decay", 0.01);
      int64_t step = o.optimizer_step > 0 ? o.optimizer_step : attr_i(op, "step", 1);
      double c1 = 1.0 - std::pow(b1, static_cast<double>(step));
      double c2 = 1.0 - std::pow(b2, static_cast<double>(step));
      if (fast && adamw_rows(op, box, ins, outs, lr, b1, b2, eps, wd, c1, c2)) return {};
      pointwise(
          op, box, ins, outs, Store::kAssign,
          [&](const float* in, float* out, const int64_t*, int64_t) {
            double p = in[0], g = in[1];
            double m = b1 * in[2] + (1 - b1) * g;
            double v = b2 * in[3] + (1 - b2) * g * g;
            double upd = (m / c1) / (std::sqrt(v / c2) + eps) + wd * p;
            out[0] = static_cast<float>(p - lr * upd);
            out[1] = static_cast<float>(m);
            out[2] = static_cast<float>(v);
          },
          fast, {}, kMergeRows);
      return {};
    }
    default:
      break;
  }
  if (cat == OpCategory::kReduction || cat == OpCategory::kLayout) {
    pointwise(
        op, box, ins, outs, mode,
        [](const float* in, float* out, const int64_t*, int64_t) { out[0] = in[0]; }, fast, {},
        kMergeRows);
    return {};
  }
  return Diagnostic("no pointwise kernel for op '" + std::string(op_kind_name(k)) + "'");
}

}  // namespace heddle::kdetail
