// Attention's score rows in one pass each way. Forward: scale -> causal_mask -> softmax, which
// lowering fuses into one instruction: a row scales its visible prefix of the scores (in float as
// the scale kernel does) and takes its softmax, writing 0 past it, as the softmax kernel does
// for a causal mask's rows; the scaled and the masked scores are never written. Backward: the
// gradient of the scores, softmax's gradient given its output (norm_grad fn=softmax_out), then
// the causal mask's (zero where the mask hides) and, when it follows, the scale's (times alpha):
// what autodiff makes of the forward. Run call by call, the three pass over the whole [.., q, k]
// tiles three times and softmax's gradient computes the hidden part of each row too; here a row
// reads dy and y over its visible prefix only and is written once. The visible elements get the
// calls' own arithmetic (y times dy less dy's dot with y, then times alpha in float as the fused
// chain's scale gradient).
#include <algorithm>
#include <limits>
#include <string>

#include "KernelParallel.h"
#include "KernelUtil.h"
#include "Scalar.h"
#include "Simd.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {

// A row prefix of `len` elements rounded up to whole vectors of the row loops softmax_row and
// softmax_grad_simd run on (Simd.cpp: 8 floats), at most the row's `n`: a row loop over it takes
// no partial vector, whose lanes go through the stack (a stalled load per pass on rows of a few
// vectors, as causal attention's are: on average half of 128).
int64_t whole_vectors(int64_t len, int64_t n) {
  constexpr int64_t kVector = 8;
  return std::min(n, (len + kVector - 1) / kVector * kVector);
}

using kernels::BoundCall;

bool grad_of(const Op& op, OpKind fn) {
  return op.kind == OpKind::kElementwiseGrad && attr_s(op, "fn") == op_kind_name(fn);
}

// An elementwise gradient over identity projections whose dy (input 0) is `dy`.
bool pointwise_on(const BoundCall& c, ValueId dy) {
  const Op& op = *c.op;
  if (op.inputs.empty() || op.inputs[0].value != dy || c.outs.size() != 1 ||
      op.results.size() != 1 || !same_coordinates(op.results[0].proj))
    return false;
  return std::all_of(op.inputs.begin(), op.inputs.end(),
                     [](const Operand& x) { return same_coordinates(x.proj); });
}

// A row operand's window: the elements of the last tensor dim, in order.
bool whole_rows(const Access& a) {
  for (size_t e = 0; e < a.woff.size(); ++e)
    if (a.woff[e] != static_cast<int64_t>(e)) return false;
  return true;
}

// Index dims 0..R-1 of the row op to tensor dims 0..R-1, its window over the last tensor dim.
bool rows_of_last_dim(const IndexProjection& p) {
  const int64_t r = p.index_rank();
  if (p.tensor_rank() != r + 1) return false;
  for (int64_t t = 0; t <= r; ++t) {
    if (p.map().offset()[t] != 0 || (t < r && p.window()[t] != 1)) return false;
    for (int64_t k = 0; k < r; ++k)
      if (p.map().at(t, k) != (t == k ? 1 : 0)) return false;
  }
  return true;
}

}  // namespace

bool run_scores_grad(const std::vector<BoundCall>& calls, size_t i,
                     const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                     Status* status) {
  if (o.reference || o.accumulate || i + 1 >= calls.size()) return false;
  const BoundCall& sc = calls[i];
  const Op& ng = *sc.op;
  if (ng.kind != OpKind::kNormGrad || attr_s(ng, "fn") != "softmax_out" || ng.inputs.size() != 2 ||
      sc.ins.size() != 2 || sc.outs.size() != 1 || ng.inputs[0].padded || ng.inputs[1].padded ||
      sc.ins[0]->is_int() || sc.ins[1]->is_int() || !rows_of_last_dim(ng.results[0].proj))
    return false;
  const ValueId r = ng.results[0].value;
  const BoundCall& mc = calls[i + 1];
  if (!grad_of(*mc.op, OpKind::kCausalMask) || !pointwise_on(mc, r) ||
      attr_i(*mc.op, kZigzagAttr, 0) != 0 || mc.box != ng.results[0].proj.image(sc.box) ||
      !is_temporary(temporaries, r) || read_from(calls, r, i + 2))
    return false;
  size_t last = i + 1;
  float alpha = 1.0f;
  const ValueId m = mc.op->results[0].value;
  if (i + 2 < calls.size() && grad_of(*calls[i + 2].op, OpKind::kScale) &&
      pointwise_on(calls[i + 2], m) && calls[i + 2].box == mc.box && is_temporary(temporaries, m) &&
      !read_from(calls, m, i + 3)) {
    last = i + 2;
    alpha = static_cast<float>(attr_f(*calls[i + 2].op, "alpha", 1.0));
  }
  const BoundCall& oc = calls[last];
  Access dy(*sc.ins[0], ng.inputs[0]), y(*sc.ins[1], ng.inputs[1]);
  Access ao(*oc.outs[0], oc.op->results[0]);
  const int64_t rank = sc.box.rank(), n = dy.window_size();
  if (n != mc.box.shape()[rank] || y.window_size() != n || !whole_rows(dy) || !whole_rows(y) ||
      ao.coef[rank] != 1 || oc.outs[0]->is_int())
    return false;
  const CausalMask mask(*mc.op);
  const int64_t k0 = mc.box.start()[rank];
  float* out = oc.outs[0]->f32();
  auto rows = [&](const Box& b) {
    std::vector<int64_t> p4(static_cast<size_t>(rank + 1));
    for_each_point(b, [&](const int64_t* p) {
      std::copy(p, p + rank, p4.begin());
      p4[rank] = k0;
      const float* d = dy.fdata + dy.offset(p);
      const float* yr = y.fdata + y.offset(p);
      float* w = out + ao.offset(p4.data());
      const int64_t len = mask.visible_prefix(p4.data(), 0, n);
      // The dot over the whole row (y is 0 past the prefix when it is the softmax of the masked
      // scores, but the chain does not say so); the products only where the mask shows them,
      // in whole vectors (whole_vectors): the elements past the prefix are set to 0 below.
      const int64_t upto = len >= 0 ? whole_vectors(len, n) : n;
      softmax_grad_simd(d, yr, row_dot_simd(d, yr, n), w, upto);
      if (alpha != 1.0f) row_scale_simd(w, alpha, upto);
      if (len >= 0)
        std::fill(w + len, w + n, 0.0f);
      else
        for (int64_t j = 0; j < n; ++j)
          if (mask.hidden(p4.data(), j)) w[j] = 0.0f;
    });
    return Status();
  };
  std::vector<Box> pieces = split_box({&ng}, sc.box, o);
  *status = pieces.empty() ? rows(sc.box) : run_pieces(pieces, o, rows);
  *end = last + 1;
  return true;
}

bool run_masked_softmax(const std::vector<BoundCall>& calls, size_t i,
                        const std::vector<ValueId>& temporaries, const KernelOptions& o,
                        size_t* end, Status* status) {
  if (o.reference || o.accumulate) return false;
  const bool scaled = calls[i].op->kind == OpKind::kScale;
  const size_t m = scaled ? i + 1 : i;
  if (m + 1 >= calls.size()) return false;
  const BoundCall &xc = calls[i], &mc = calls[m], &sc = calls[m + 1];
  const Op &mask_op = *mc.op, &soft = *sc.op;
  if (mask_op.kind != OpKind::kCausalMask || attr_i(mask_op, kZigzagAttr, 0) != 0 ||
      soft.kind != OpKind::kSoftmax || soft.inputs.size() != 1 || sc.ins.size() != 1 ||
      sc.outs.size() != 1 || soft.inputs[0].padded || soft.results.size() != 1 ||
      sc.ins[0]->is_int() || sc.outs[0]->is_int() || !rows_of_last_dim(soft.inputs[0].proj) ||
      !rows_of_last_dim(soft.results[0].proj) || xc.ins.empty() || xc.ins[0]->is_int())
    return false;
  const ValueId masked = mask_op.results[0].value;
  if (soft.inputs[0].value != masked || mc.box != soft.inputs[0].proj.image(sc.box) ||
      !is_temporary(temporaries, masked) || read_from(calls, masked, m + 2))
    return false;
  if (scaled) {
    const ValueId v = xc.op->results[0].value;
    if (!pointwise_on(xc, xc.op->inputs[0].value) || !pointwise_on(mc, v) || xc.box != mc.box ||
        !is_temporary(temporaries, v) || read_from(calls, v, m + 1))
      return false;
  } else if (!pointwise_on(mc, mask_op.inputs[0].value)) {
    return false;
  }
  const double alpha = scaled ? attr_f(*xc.op, "alpha", 1.0) : 1.0;
  // The scale's float arithmetic rounds the double product of x and alpha; where alpha is a
  // float (attention's 1/sqrt(d) for a power-of-two d), that product is exact and its rounding
  // is the float product's, so the rows scale in float vectors instead of through doubles (a
  // third of a row's time in the scalar loop).
  const auto alpha_f = static_cast<float>(alpha);
  const bool float_alpha = static_cast<double>(alpha_f) == alpha;
  Access x(*xc.ins[0], xc.op->inputs[0]), ao(*sc.outs[0], soft.results[0]);
  const int64_t rank = sc.box.rank(), n = ao.window_size();
  if (n != mc.box.shape()[rank] || !whole_rows(ao) || x.coef[rank] != 1) return false;
  const CausalMask mask(mask_op);
  const int64_t k0 = mc.box.start()[rank];
  float* out = sc.outs[0]->f32();
  auto rows = [&](const Box& b) {
    std::vector<int64_t> p4(static_cast<size_t>(rank + 1));
    std::vector<float> t(static_cast<size_t>(n));
    for_each_point(b, [&](const int64_t* p) {
      std::copy(p, p + rank, p4.begin());
      p4[rank] = k0;
      const float* xr = x.fdata + x.offset(p4.data());
      float* yr = out + ao.offset(p);
      // The scores the unfused calls would hand the softmax: the scale's float arithmetic, -inf
      // where the mask hides. Past a visible prefix only the prefix is read and the weights are
      // 0, as the softmax kernel does for a mask's rows; other rows go whole.
      auto scores = [&](int64_t j) {
        return scaled ? unary_f<OpKind::kScale>(xr[j], alpha) : xr[j];
      };
      const int64_t len = mask.visible_prefix(p4.data(), 0, n);
      if (len > 0 && len < n) {
        // The prefix in whole vectors, the hidden scores past it -inf: their weights are exactly
        // 0 and add 0 to the sum, so y is bit for bit the prefix's softmax and 0 past it.
        const int64_t upto = whole_vectors(len, n);
        if (float_alpha)
          for (int64_t j = 0; j < len; ++j) t[j] = xr[j] * alpha_f;
        else
          for (int64_t j = 0; j < len; ++j) t[j] = scores(j);
        std::fill(t.begin() + len, t.begin() + upto, -std::numeric_limits<float>::infinity());
        softmax_probs(t.data(), yr, upto);
        std::fill(yr + upto, yr + n, 0.0f);
        return;
      }
      for (int64_t j = 0; j < n; ++j)
        t[j] = mask.hidden(p4.data(), j) ? -std::numeric_limits<float>::infinity() : scores(j);
      softmax_probs(t.data(), yr, n);
    });
    return Status();
  };
  std::vector<Box> pieces = split_box({&soft}, sc.box, o);
  *status = pieces.empty() ? rows(sc.box) : run_pieces(pieces, o, rows);
  *end = m + 2;
  return true;
}

}  // namespace heddle::kdetail
