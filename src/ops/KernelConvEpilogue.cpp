// A convolution and the elementwise ops after it in a fused chain (its bias, activation, batch
// norm scale and shift) as one oneDNN convolution with post-ops: the epilogue runs on the
// convolution's output block while it is in cache, in the primitive's threads, and the values in
// between never reach memory. A concat along the channels with such an epilogue (DenseNet's
// concat, batch norm and ReLU) runs as one threaded loop over the channel planes of its inputs. The
// epilogue ops are recognized on the bound calls: each reads the previous one's value point for
// point and, for a binary op, a value per output channel (a bias broadcast over the plane, a
// scalar).
#include <algorithm>
#include <cmath>

#include "KernelConvForm.h"
#include "heddle/ops/Chain.h"

namespace heddle::kdetail {

namespace {

using namespace convform;
using kernels::BoundCall;

bool contains(const std::vector<ValueId>& vs, ValueId v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

// True when input k of call c walks the same elements as its result (a float tile of the same
// region, identity projection) and the result's tile is `region`, its index dims the tensor's.
bool point_to_point(const BoundCall& c, size_t k, const Box& region) {
  const Operand& x = c.op->inputs[k];
  const Tensor& in = *c.ins[k];
  const Tensor& out = *c.outs[0];
  if (x.padded || in.is_int() || out.is_int() || c.box != region || out.region() != region ||
      in.region() != region || c.op->space.has_reduce())
    return false;
  Access a(in, x), r(out, c.op->results[0]);
  if (a.window_size() != 1 || r.window_size() != 1 || a.coef != r.coef) return false;
  for (int64_t d = 0; d < 4; ++d)
    if (region.end()[d] - region.start()[d] > 1 && r.coef[d] != out.strides()[d]) return false;
  std::vector<int64_t> p(region.start().values());
  return a.offset(p.data()) == 0 && r.offset(p.data()) == 0;
}

// True when input k of call c holds one value per channel (dim 1) of `region`: constant over the
// other dims.
bool per_channel(const BoundCall& c, size_t k, const Box& region) {
  const Operand& x = c.op->inputs[k];
  if (x.padded || c.ins[k]->is_int()) return false;
  Access a(*c.ins[k], x);
  if (a.window_size() != 1) return false;
  for (int64_t d : {0, 2, 3})
    if (region.end()[d] - region.start()[d] > 1 && a.coef[d] != 0) return false;
  return true;
}

// The values of input k of call c (per_channel) for the channels of `region`, in order.
std::vector<float> channel_values(const BoundCall& c, size_t k, const Box& region) {
  Access a(*c.ins[k], c.op->inputs[k]);
  std::vector<int64_t> p(region.start().values());
  std::vector<float> v;
  for (p[1] = region.start()[1]; p[1] < region.end()[1]; ++p[1])
    v.push_back(a.fdata[a.offset(p.data())]);
  return v;
}

// One recognized epilogue step: the post-op, the calls it covers (ending at `end`) and, for a
// binary op, the call and input that hold its value per channel.
struct Step {
  PostOp op;
  size_t end = 0, call = 0, input = 0;
};

// The epilogue step that call k starts on value `cur` (read as input `at`), or nullopt.
std::optional<Step> step(const std::vector<BoundCall>& calls, size_t k, size_t at, ValueId cur,
                         const Box& region) {
  const BoundCall& c = calls[k];
  const Op& op = *c.op;
  if (op.results.size() != 1 || c.outs.size() != 1 || !point_to_point(c, at, region))
    return std::nullopt;
  Step s;
  s.end = k + 1;
  switch (op.kind) {
    case OpKind::kRelu:
      s.op.kind = PostOp::kRelu;
      return s;
    case OpKind::kSigmoid: {
      // x * sigmoid(x): SiLU, when the next call multiplies the two.
      s.op.kind = PostOp::kSigmoid;
      if (k + 1 < calls.size()) {
        const BoundCall& m = calls[k + 1];
        const Op& mo = *m.op;
        if (mo.kind == OpKind::kMul && mo.inputs.size() == 2 && m.outs.size() == 1) {
          ValueId sig = op.results[0].value;
          for (size_t q = 0; q < 2; ++q)
            if (mo.inputs[q].value == cur && mo.inputs[1 - q].value == sig &&
                point_to_point(m, q, region) && point_to_point(m, 1 - q, region)) {
              s.op.kind = PostOp::kSwish;
              s.end = k + 2;
            }
        }
      }
      return s;
    }
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kMaximum:
    case OpKind::kMinimum: {
      if (op.inputs.size() != 2 || op.inputs[1 - at].value == cur ||
          !per_channel(c, 1 - at, region))
        return std::nullopt;
      s.call = k;
      s.input = 1 - at;
      s.op.kind = op.kind == OpKind::kAdd       ? PostOp::kAdd
                  : op.kind == OpKind::kMul     ? PostOp::kMul
                  : op.kind == OpKind::kMaximum ? PostOp::kMax
                                                : PostOp::kMin;
      return s;
    }
    default:
      return std::nullopt;
  }
}

// For a concat along dim 1 of rank-4 tiles into `region` whose inputs hold every point of it:
// the input tile and its channel that each channel of the region reads, else empty.
std::vector<std::pair<const Tensor*, int64_t>> concat_sources(const BoundCall& c,
                                                              const Box& region) {
  const Op& op = *c.op;
  std::vector<std::pair<const Tensor*, int64_t>> src(
      static_cast<size_t>(region.end()[1] - region.start()[1]), {nullptr, 0});
  if (!shifted_identity(op.results[0], 4) || op.results[0].proj.map().offset() != IVec::zeros(4))
    return {};
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& t = *c.ins[i];
    const IVec& off = op.inputs[i].proj.map().offset();
    if (t.is_int() || t.rank() != 4 || !shifted_identity(op.inputs[i], 4) || off[0] != 0 ||
        off[2] != 0 || off[3] != 0)
      return {};
    // The region's channels this tile holds (channel ch reads the input's ch + off[1]).
    const int64_t lo = std::max(region.start()[1], t.origin()[1] - off[1]),
                  hi = std::min(region.end()[1], t.origin()[1] + t.shape()[1] - off[1]);
    if (lo >= hi) continue;
    for (int64_t d : {0, 2, 3})
      if (t.origin()[d] > region.start()[d] || t.origin()[d] + t.shape()[d] < region.end()[d])
        return {};
    for (int64_t ch = lo; ch < hi; ++ch)
      src[static_cast<size_t>(ch - region.start()[1])] = {&t, ch + off[1]};
  }
  for (const auto& s : src)
    if (!s.first) return {};
  return src;
}

// The concat of `src` (concat_sources) into `out` over `region`, with epilogue `ep`, row by row
// on `threads` threads.
void run_concat_epilogue(const std::vector<std::pair<const Tensor*, int64_t>>& src, Tensor& out,
                         const Box& region, const std::vector<PostOp>& ep, int threads) {
  const int64_t n0 = region.start()[0], c0 = region.start()[1], h0 = region.start()[2],
                w0 = region.start()[3];
  const int64_t N = region.end()[0] - n0, C = region.end()[1] - c0, H = region.end()[2] - h0,
                W = region.end()[3] - w0;
  const Tile4 y(out);
  // Per channel: where its source plane starts at (n0, h0, w0), the source's image stride and
  // whether its planes are whole rows in both tiles.
  std::vector<const float*> xs(static_cast<size_t>(C));
  std::vector<int64_t> xn(static_cast<size_t>(C)), xh(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const Tile4 x(*src[static_cast<size_t>(c)].first);
    xs[c] = x.data + x.off(n0, src[static_cast<size_t>(c)].second, h0, w0);
    xn[c] = x.st[0];
    xh[c] = x.st[3] == 1 && x.st[2] == W && y.st[3] == 1 && y.st[2] == W ? 0 : x.st[2];
  }
  const int64_t planes = N * C;
#pragma omp parallel for num_threads(threads) if (threads > 1 && planes * H * W >= 8192)
  for (int64_t q = 0; q < planes; ++q) {
    const int64_t n = q / C, c = q % C;
    const float* xp = xs[c] + n * xn[c];
    float* yp = y.data + y.off(n0 + n, c0 + c, h0, w0);
    if (xh[c] == 0) {  // whole planes: one row
      std::copy(xp, xp + H * W, yp);
      apply_epilogue(ep, c, yp, H * W);
      continue;
    }
    for (int64_t h = 0; h < H; ++h) {
      std::copy(xp + h * xh[c], xp + h * xh[c] + W, yp + h * y.st[2]);
      apply_epilogue(ep, c, yp + h * y.st[2], W);
    }
  }
}

}  // namespace

bool run_conv_epilogue(const std::vector<BoundCall>& calls, size_t i,
                       const std::vector<ValueId>& temporaries, const KernelOptions& o, size_t* end,
                       Status* status) {
  const BoundCall& conv = calls[i];
  const bool cat = conv.op->kind == OpKind::kConcat;
  if (o.reference || o.accumulate || (o.direct_conv && !cat) ||
      (conv.op->kind != OpKind::kConv2d && !cat) || conv.outs.size() != 1 ||
      conv.outs[0]->rank() != 4 || conv.outs[0]->is_int())
    return false;
  const Box region = conv.outs[0]->region();
  if (region != conv.op->results[0].proj.image(conv.box)) return false;
  std::vector<std::pair<const Tensor*, int64_t>> sources;
  if (cat && (sources = concat_sources(conv, region)).empty()) return false;
  // Walk the calls: independent ones (a bias's reshape) run first; each step reads the value of
  // the last. Stop at the first call that reads the chain's values otherwise.
  std::vector<ValueId> chain = {conv.op->results[0].value};  // values in order
  std::vector<Step> steps;
  std::vector<size_t> before;  // independent calls
  for (size_t k = i + 1; k < calls.size();) {
    const Op& op = *calls[k].op;
    int at = -1, reads = 0;
    for (size_t q = 0; q < op.inputs.size(); ++q)
      if (contains(chain, op.inputs[q].value)) {
        ++reads;
        if (op.inputs[q].value == chain.back()) at = static_cast<int>(q);
      }
    if (reads == 0) {
      if (op.space.has_reduce() || !(is_elementwise(op.kind) || op.kind == OpKind::kReshape)) break;
      before.push_back(k++);
      continue;
    }
    if (at < 0 || reads != 1) break;
    auto s = step(calls, k, static_cast<size_t>(at), chain.back(), region);
    if (!s) break;
    for (size_t q = k; q < s->end; ++q) chain.push_back(calls[q].op->results[0].value);
    k = s->end;
    steps.push_back(std::move(*s));
  }
  // The longest run of steps whose values, but the last, are temporaries nobody reads after it.
  while (!steps.empty()) {
    const size_t j = steps.back().end;
    bool ok = true;
    for (size_t q = i; q < j && ok; ++q) {
      ValueId v = calls[q].op->results[0].value;
      if (q + 1 == j || !contains(chain, v)) continue;
      ok = is_temporary(temporaries, v) && !read_from(calls, v, j);
    }
    if (ok) break;
    steps.pop_back();
  }
  if (steps.empty()) return false;
  const size_t j = steps.back().end;
  for (size_t k : before) {
    if (k >= j) break;
    *status = kernels::run(*calls[k].op, calls[k].box, calls[k].ins, calls[k].outs, o);
    if (!status->ok()) {
      *end = k + 1;
      return true;
    }
  }
  std::vector<PostOp> ep;
  for (Step& s : steps) {
    if (s.op.kind <= PostOp::kMin) s.op.channel = channel_values(calls[s.call], s.input, region);
    ep.push_back(std::move(s.op));
  }
  if (cat)
    run_concat_epilogue(sources, *calls[j - 1].outs[0], region, ep, std::max(1, o.threads));
  else if (!run_conv1x1(*conv.op, conv.box, conv.ins, {calls[j - 1].outs[0]}, o, &ep) &&
           !run_conv_dnnl_fused(*conv.op, conv.box, conv.ins, *calls[j - 1].outs[0], ep, o))
    return false;
  *end = j;
  *status = Status();
  return true;
}

}  // namespace heddle::kdetail
