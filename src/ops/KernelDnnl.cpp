// oneDNN convolution and pooling kernels, forward and backward, on local boxes. A box becomes
// one oneDNN problem (or one per group when its channel ranges do not tile the groups): the
// operands are strided views of the tiles, and the spatial window of a sub-box becomes a view of
// the tile rows it reads plus explicit padding for the rows outside the tile (the tensor's padding,
// or the far side of a halo: both read as zero, as in the direct loops). Primitives are created
// once per shape and thread count and cached; the operands are reordered to and from the layouts
// oneDNN picks (blocked formats for the jit kernels) on each call, through per-thread buffers.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "KernelConvForm.h"
#include "KernelUtil.h"

namespace heddle::kdetail {

namespace {

using namespace convform;
using dnnl::memory;
using Tag = memory::format_tag;
using MDims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Per-thread buffers, reused across calls (slots 0-2: inputs, 3: output, 4: scratchpad,
// 5: workspace), 64-byte aligned.
void* buffer(int slot, size_t bytes) {
  thread_local std::vector<float> bufs[6];
  auto& b = bufs[slot];
  size_t n = bytes / sizeof(float) + 32;
  if (b.size() < n) b.resize(n);
  auto p = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
}

// One operand of a primitive: the view of the tile (`user`) and the layout the primitive wants
// (`prim`); a reorder between them when they differ (or to add into the output).
struct Port {
  int arg = 0;
  memory::desc user, prim;
  std::optional<dnnl::reorder> reorder;
  memory::desc reorder_scratch;
};

struct Plan {
  dnnl::primitive prim;
  memory::desc scratch;
  std::vector<Port> ins;
  Port out;
  // Max pooling gradient: the forward pass that records the workspace of argmax positions.
  std::optional<dnnl::primitive> pre;
  memory::desc pre_dst, pre_scratch, workspace;
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

// A port for `user` feeding (or, `to_user`, written from) a primitive that wants `prim`. With
// `sum`, the output reorder adds into the tile instead of overwriting it.
Port make_port(int arg, const memory::desc& user, const memory::desc& prim, bool to_user,
               bool sum = false) {
  Port p{arg, user, prim, std::nullopt, {}};
  if (user == prim && !sum) return p;
  dnnl::primitive_attr a = user_scratchpad();
  if (sum) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    a.set_post_ops(po);
  }
  auto pd = to_user ? dnnl::reorder::primitive_desc(engine(), prim, engine(), user, a)
                    : dnnl::reorder::primitive_desc(engine(), user, engine(), prim, a);
  p.reorder = dnnl::reorder(pd);
  p.reorder_scratch = pd.scratchpad_desc();
  return p;
}

memory scratch_memory(const memory::desc& d) {
  return memory(d, engine(), buffer(4, d.get_size()));
}

void execute(const Plan& p, const std::vector<const float*>& in, float* out) {
  dnnl::stream& s = stream();
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < p.ins.size(); ++i) {
    const Port& pt = p.ins[i];
    memory u(pt.user, engine(), const_cast<float*>(in[i]));
    if (!pt.reorder) {
      args[pt.arg] = u;
      continue;
    }
    memory t(pt.prim, engine(), buffer(static_cast<int>(i), pt.prim.get_size()));
    pt.reorder->execute(s, {{DNNL_ARG_FROM, u},
                            {DNNL_ARG_TO, t},
                            {DNNL_ARG_SCRATCHPAD, scratch_memory(pt.reorder_scratch)}});
    args[pt.arg] = t;
  }
  if (p.pre) {  // max pooling gradient: recompute the forward pass for its workspace
    memory ws(p.workspace, engine(), buffer(5, p.workspace.get_size()));
    memory dst(p.pre_dst, engine(), buffer(3, p.pre_dst.get_size()));
    p.pre->execute(s, {{DNNL_ARG_SRC, args.at(DNNL_ARG_SRC)},
                       {DNNL_ARG_DST, dst},
                       {DNNL_ARG_WORKSPACE, ws},
                       {DNNL_ARG_SCRATCHPAD, scratch_memory(p.pre_scratch)}});
    args.erase(DNNL_ARG_SRC);
    args[DNNL_ARG_WORKSPACE] = ws;
  }
  memory u(p.out.user, engine(), out);
  memory t = p.out.reorder ? memory(p.out.prim, engine(), buffer(3, p.out.prim.get_size())) : u;
  args[p.out.arg] = t;
  args[DNNL_ARG_SCRATCHPAD] = scratch_memory(p.scratch);
  p.prim.execute(s, args);
  if (p.out.reorder)
    p.out.reorder->execute(s, {{DNNL_ARG_FROM, t},
                               {DNNL_ARG_TO, u},
                               {DNNL_ARG_SCRATCHPAD, scratch_memory(p.out.reorder_scratch)}});
  s.wait();
}

// The cache of plans by problem key (null: oneDNN has no implementation; fall back).
struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t x : k) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

template <class F>
std::shared_ptr<const Plan> cached(const std::vector<int64_t>& key, F&& make) {
  static std::mutex mu;
  static std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Plan>, KeyHash> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<const Plan> plan;
  try {
    plan = std::make_shared<const Plan>(make());
  } catch (const dnnl::error&) {
    plan = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 4096) cache.clear();  // bounded (plans in use are shared, they stay alive)
  return cache.emplace(key, plan).first->second;
}

// The tile rows (or columns) that outputs [lo, hi) of a window of `keff` taps at `stride` and
// leading padding `pad` read, clipped to the tile [org, org + ext), and the padding left on each
// side. Empty when no tap reads the tile.
struct Span {
  int64_t start = 0, size = 0, pad_l = 0, pad_r = 0;
};
std::optional<Span> span(int64_t lo, int64_t hi, int64_t stride, int64_t pad, int64_t keff,
                         int64_t org, int64_t ext) {
  int64_t need_lo = lo * stride - pad, need_hi = (hi - 1) * stride - pad + keff;
  int64_t a = std::max(org, need_lo), b = std::min(org + ext, need_hi);
  if (b <= a) return std::nullopt;
  return Span{a, b - a, a - need_lo, need_hi - b};
}

MDims strides4(const Tile4& t) { return {t.st[0], t.st[1], t.st[2], t.st[3]}; }

memory::desc any(const MDims& d) { return memory::desc(d, kF32, Tag::any); }

// A convolution problem in oneDNN's terms: per-group channels, views' dims and strides.
struct ConvProblem {
  int64_t N = 0, G = 1, IC = 0, OC = 0, IH = 0, IW = 0, OH = 0, OW = 0, KH = 0, KW = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, plh = 0, plw = 0, prh = 0, prw = 0;
  MDims xs, ws, ys;  // strides of the src, weights ([g,] oc, ic, kh, kw) and dst views

  memory::desc src() const { return memory::desc({N, G * IC, IH, IW}, kF32, xs); }
  memory::desc dst() const { return memory::desc({N, G * OC, OH, OW}, kF32, ys); }
  memory::desc wts() const {
    if (G == 1) return memory::desc({OC, IC, KH, KW}, kF32, MDims(ws.begin() + 1, ws.end()));
    return memory::desc({G, OC, IC, KH, KW}, kF32, ws);
  }
  MDims wdims() const { return G == 1 ? MDims{OC, IC, KH, KW} : MDims{G, OC, IC, KH, KW}; }
  std::vector<int64_t> key(int kind, bool acc, int threads) const {
    std::vector<int64_t> k = {kind, acc, threads, N,  G,  IC, OC,  IH,  IW,  OH, OW,
                              KH,   KW,  sh,      sw, dh, dw, plh, plw, prh, prw};
    for (const MDims* v : {&xs, &ws, &ys}) k.insert(k.end(), v->begin(), v->end());
    return k;
  }
  dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind pk) const {
    return dnnl::convolution_forward::desc(
        pk, dnnl::algorithm::convolution_direct, any({N, G * IC, IH, IW}), any(wdims()),
        any({N, G * OC, OH, OW}), {sh, sw}, {dh - 1, dw - 1}, {plh, plw}, {prh, prw});
  }
};

std::atomic<int64_t> served{0};

enum Kind : int { kFwd = 1, kBwdData, kBwdWeights, kPoolFwd, kPoolBwd };

Plan conv_plan(const ConvProblem& c, Kind kind, bool acc) {
  Plan p;
  dnnl::primitive_attr attr = user_scratchpad();
  if (kind == kFwd) {
    dnnl::convolution_forward::primitive_desc pd(c.fwd_desc(dnnl::prop_kind::forward_inference),
                                                 attr, engine());
    p.prim = dnnl::convolution_forward(pd);
    p.scratch = pd.scratchpad_desc();
    p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false),
             make_port(DNNL_ARG_WEIGHTS, c.wts(), pd.weights_desc(), false)};
    p.out = make_port(DNNL_ARG_DST, c.dst(), pd.dst_desc(), true, acc);
    return p;
  }
  dnnl::convolution_forward::primitive_desc hint(c.fwd_desc(dnnl::prop_kind::forward_training),
                                                 engine());
  if (kind == kBwdData) {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct,
                                            any({c.N, c.G * c.IC, c.IH, c.IW}), any(c.wdims()),
                                            any({c.N, c.G * c.OC, c.OH, c.OW}), {c.sh, c.sw},
                                            {c.dh - 1, c.dw - 1}, {c.plh, c.plw}, {c.prh, c.prw});
    dnnl::convolution_backward_data::primitive_desc pd(d, attr, engine(), hint);
    p.prim = dnnl::convolution_backward_data(pd);
    p.scratch = pd.scratchpad_desc();
    p.ins = {make_port(DNNL_ARG_DIFF_DST, c.dst(), pd.diff_dst_desc(), false),
             make_port(DNNL_ARG_WEIGHTS, c.wts(), pd.weights_desc(), false)};
    p.out = make_port(DNNL_ARG_DIFF_SRC, c.src(), pd.diff_src_desc(), true, acc);
    return p;
  }
  dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct,
                                             any({c.N, c.G * c.IC, c.IH, c.IW}), any(c.wdims()),
                                             any({c.N, c.G * c.OC, c.OH, c.OW}), {c.sh, c.sw},
                                             {c.dh - 1, c.dw - 1}, {c.plh, c.plw}, {c.prh, c.prw});
  dnnl::convolution_backward_weights::primitive_desc pd(d, attr, engine(), hint);
  p.prim = dnnl::convolution_backward_weights(pd);
  p.scratch = pd.scratchpad_desc();
  p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false),
           make_port(DNNL_ARG_DIFF_DST, c.dst(), pd.diff_dst_desc(), false)};
  p.out = make_port(DNNL_ARG_DIFF_WEIGHTS, c.wts(), pd.diff_weights_desc(), true, acc);
  return p;
}

// Pooling over a ConvProblem with G = 1 and IC = OC = the channels (weights unused). Plain
// NCHW on both sides: the jit pooling kernels take it without reorders.
Plan pool_plan(const ConvProblem& c, Kind kind, bool mx) {
  Plan p;
  dnnl::primitive_attr attr = user_scratchpad();
  const auto alg = mx ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
  memory::desc src({c.N, c.IC, c.IH, c.IW}, kF32, Tag::nchw),
      dst({c.N, c.OC, c.OH, c.OW}, kF32, Tag::nchw);
  auto fwd = [&](dnnl::prop_kind pk) {
    return dnnl::pooling_forward::desc(pk, alg, src, dst, {c.sh, c.sw}, {c.KH, c.KW},
                                       {c.plh, c.plw}, {c.prh, c.prw});
  };
  if (kind == kPoolFwd) {
    dnnl::pooling_forward::primitive_desc pd(fwd(dnnl::prop_kind::forward_inference), attr,
                                             engine());
    p.prim = dnnl::pooling_forward(pd);
    p.scratch = pd.scratchpad_desc();
    p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false)};
    p.out = make_port(DNNL_ARG_DST, c.dst(), pd.dst_desc(), true);
    return p;
  }
  dnnl::pooling_forward::primitive_desc hint(fwd(dnnl::prop_kind::forward_training), attr,
                                             engine());
  dnnl::pooling_backward::desc d(alg, src, dst, {c.sh, c.sw}, {c.KH, c.KW}, {c.plh, c.plw},
                                 {c.prh, c.prw});
  dnnl::pooling_backward::primitive_desc pd(d, attr, engine(), hint);
  p.prim = dnnl::pooling_backward(pd);
  p.scratch = pd.scratchpad_desc();
  p.ins = {make_port(DNNL_ARG_DIFF_DST, c.dst(), pd.diff_dst_desc(), false)};
  if (mx) {
    p.ins.push_back(make_port(DNNL_ARG_SRC, c.src(), hint.src_desc(), false));
    p.pre = dnnl::pooling_forward(hint);
    p.pre_dst = hint.dst_desc();
    p.pre_scratch = hint.scratchpad_desc();
    p.workspace = hint.workspace_desc();
  }
  p.out = make_port(DNNL_ARG_DIFF_SRC, c.src(), pd.diff_src_desc(), true);
  return p;
}

bool run_plan(const ConvProblem& c, Kind kind, const KernelOptions& o,
              const std::vector<const float*>& in, float* out, bool mx = false) {
  const int threads = std::max(1, o.threads);
  omp_set_num_threads(threads);
  // Pooling has no reduce dims: it overwrites even when accumulating.
  const bool pool = kind == kPoolFwd || kind == kPoolBwd;
  const bool acc = o.accumulate && !pool;
  auto plan = cached(c.key(kind + (mx ? 16 : 0), acc, threads),
                     [&] { return pool ? pool_plan(c, kind, mx) : conv_plan(c, kind, acc); });
  if (!plan) return false;
  execute(*plan, in, out);
  served.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Resets the image of `box` under result 0 (for kernels that write only part of it).
void reset_output(const Op& op, const Box& box, Tensor& out) {
  Tensor z = Tensor::tile(out.dtype(), op.results[0].proj.image(box));
  out.copy_from(z);
}

// conv2d over [n, (g), co, oh, ow, ci:sum].
bool conv_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o) {
  Dims d(op, {"n", "g", "co", "oh", "ow", "ci"}, "g");
  if (!d.ok || ins.size() != 2) return false;
  Tile4 X(*ins[0]), W(*ins[1]), Y(*outs[0]);
  const int64_t KH = op.inputs[1].proj.window()[2], KW = op.inputs[1].proj.window()[3];
  if (W.org[2] != 0 || W.org[3] != 0 || W.ext[2] != KH || W.ext[3] != KW) return false;
  const int64_t cig = op.space.dim(d.pos[5]).extent, cog = op.space.dim(d.pos[2]).extent;
  const int64_t n_ = d.pos[0], g_ = d.pos[1], co_ = d.pos[2], oh_ = d.pos[3], ow_ = d.pos[4],
                ci_ = d.pos[5];
  Geom geo(op);
  const Operand &xo = op.inputs[0], &wo = op.inputs[1], &yo = op.results[0];
  geo.s0 = coef(xo, 2, oh_);
  geo.s1 = coef(xo, 3, ow_);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{n_, 1}}) || !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) ||
      !row_is(xo, 2, {{oh_, geo.s0}}, -geo.p0, geo.d0 * (KH - 1) + 1) ||
      !row_is(xo, 3, {{ow_, geo.s1}}, -geo.p1, geo.d1 * (KW - 1) + 1) ||
      !row_is(wo, 0, {{g_, cog}, {co_, 1}}) || !row_is(wo, 1, {{ci_, 1}}) ||
      !row_is(wo, 2, {}, 0, KH) || !row_is(wo, 3, {}, 0, KW) || !row_is(yo, 0, {{n_, 1}}) ||
      !row_is(yo, 1, {{g_, cog}, {co_, 1}}) || !row_is(yo, 2, {{oh_, 1}}) ||
      !row_is(yo, 3, {{ow_, 1}}))
    return false;
  Range rn = d.range(box, 0), rg = d.range(box, 1), co = d.range(box, 2), oh = d.range(box, 3),
        ow = d.range(box, 4), ci = d.range(box, 5);
  auto sh = span(oh.lo, oh.hi, geo.s0, geo.p0, geo.d0 * (KH - 1) + 1, X.org[2], X.ext[2]);
  auto sw = span(ow.lo, ow.hi, geo.s1, geo.p1, geo.d1 * (KW - 1) + 1, X.org[3], X.ext[3]);
  if (!sh || !sw) return false;
  // All groups of the box in one problem when their channel ranges are whole, else one each.
  const bool whole = ci.size() == cig && co.size() == cog;
  ConvProblem c;
  c.N = rn.size();
  c.G = whole ? rg.size() : 1;
  c.IC = ci.size();
  c.OC = co.size();
  c.IH = sh->size;
  c.IW = sw->size;
  c.OH = oh.size();
  c.OW = ow.size();
  c.KH = KH;
  c.KW = KW;
  c.sh = geo.s0;
  c.sw = geo.s1;
  c.dh = geo.d0;
  c.dw = geo.d1;
  c.plh = sh->pad_l;
  c.plw = sw->pad_l;
  c.prh = sh->pad_r;
  c.prw = sw->pad_r;
  c.xs = strides4(X);
  c.ws = {cog * W.st[0], W.st[0], W.st[1], W.st[2], W.st[3]};
  c.ys = strides4(Y);
  // One problem per group leaves the channels between the groups' ranges unwritten: they are
  // part of the output image, which a non-accumulating call resets.
  if (c.G < rg.size() && !o.accumulate) reset_output(op, box, *outs[0]);
  for (int64_t g = rg.lo; g < rg.hi; g += c.G) {
    const float* x = X.data + X.off(rn.lo, g * cig + ci.lo, sh->start, sw->start);
    const float* w = W.data + W.off(g * cog + co.lo, ci.lo, 0, 0);
    float* y = Y.data + Y.off(rn.lo, g * cog + co.lo, oh.lo, ow.lo);
    if (!run_plan(c, kFwd, o, {x, w}, y)) return false;
  }
  return true;
}

// conv2d_grad_input over [n, (g), ci, ih, iw, co:sum], for boxes over the whole input plane.
bool conv_grad_input(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs, const KernelOptions& o) {
  Dims d(op, {"n", "g", "ci", "ih", "iw", "co"}, "g");
  if (!d.ok) return false;
  Tile4 DY(*ins[0]), W(*ins[1]), DX(*outs[0]);
  Geom geo(op);
  const IVec &yw = op.inputs[0].proj.window(), &ww = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], KH = ww[2], KW = ww[3];
  if (W.org[2] != 0 || W.org[3] != 0 || W.ext[2] != KH || W.ext[3] != KW || DY.org[2] != 0 ||
      DY.org[3] != 0 || DY.ext[2] != OH || DY.ext[3] != OW)
    return false;
  const int64_t cig = op.space.dim(d.pos[2]).extent, cog = op.space.dim(d.pos[5]).extent;
  const int64_t n_ = d.pos[0], g_ = d.pos[1], ci_ = d.pos[2], ih_ = d.pos[3], iw_ = d.pos[4],
                co_ = d.pos[5];
  const Operand &yo = op.inputs[0], &wo = op.inputs[1], &xo = op.results[0];
  if (!row_is(yo, 0, {{n_, 1}}) || !row_is(yo, 1, {{g_, cog}, {co_, 1}}) ||
      !row_is(yo, 2, {}, 0, OH) || !row_is(yo, 3, {}, 0, OW) ||
      !row_is(wo, 0, {{g_, cog}, {co_, 1}}) || !row_is(wo, 1, {{ci_, 1}}) ||
      !row_is(wo, 2, {}, 0, KH) || !row_is(wo, 3, {}, 0, KW) || !row_is(xo, 0, {{n_, 1}}) ||
      !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) || !row_is(xo, 2, {{ih_, 1}}) ||
      !row_is(xo, 3, {{iw_, 1}}))
    return false;
  Range rn = d.range(box, 0), rg = d.range(box, 1), ci = d.range(box, 2), ih = d.range(box, 3),
        iw = d.range(box, 4), co = d.range(box, 5);
  const int64_t H = op.space.dim(ih_).extent, Wd = op.space.dim(iw_).extent;
  if (ih.lo != 0 || ih.hi != H || iw.lo != 0 || iw.hi != Wd) return false;
  // Rows and columns past the last window get no gradient; oneDNN's problem stops before them.
  const int64_t need_h = (OH - 1) * geo.s0 - geo.p0 + geo.d0 * (KH - 1) + 1,
                need_w = (OW - 1) * geo.s1 - geo.p1 + geo.d1 * (KW - 1) + 1;
  ConvProblem c;
  c.N = rn.size();
  c.G = ci.size() == cig && co.size() == cog ? rg.size() : 1;
  c.IC = ci.size();
  c.OC = co.size();
  c.IH = std::min(H, need_h);
  c.IW = std::min(Wd, need_w);
  if (c.IH <= 0 || c.IW <= 0) return false;
  c.OH = OH;
  c.OW = OW;
  c.KH = KH;
  c.KW = KW;
  c.sh = geo.s0;
  c.sw = geo.s1;
  c.dh = geo.d0;
  c.dw = geo.d1;
  c.plh = geo.p0;
  c.plw = geo.p1;
  c.prh = need_h - c.IH;
  c.prw = need_w - c.IW;
  c.xs = strides4(DX);
  c.ws = {cog * W.st[0], W.st[0], W.st[1], W.st[2], W.st[3]};
  c.ys = strides4(DY);
  // Rows past the last window, and with one problem per group the channels between the groups'
  // ranges, are part of the output image but not written: a non-accumulating call resets them.
  if ((c.IH < H || c.IW < Wd || c.G < rg.size()) && !o.accumulate) reset_output(op, box, *outs[0]);
  for (int64_t g = rg.lo; g < rg.hi; g += c.G) {
    const float* dy = DY.data + DY.off(rn.lo, g * cog + co.lo, 0, 0);
    const float* w = W.data + W.off(g * cog + co.lo, ci.lo, 0, 0);
    float* dx = DX.data + DX.off(rn.lo, g * cig + ci.lo, 0, 0);
    if (!run_plan(c, kBwdData, o, {dy, w}, dx)) return false;
  }
  return true;
}

// conv2d_grad_weight over [(g), co, ci, kh, kw, n:sum, oh:sum, ow:sum], for boxes over all taps.
bool conv_grad_weight(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                      const std::vector<Tensor*>& outs, const KernelOptions& o) {
  Dims d(op, {"g", "co", "ci", "kh", "kw", "n", "oh", "ow"}, "g");
  if (!d.ok) return false;
  Tile4 X(*ins[0]), DY(*ins[1]), DW(*outs[0]);
  const int64_t cig = op.space.dim(d.pos[2]).extent, cog = op.space.dim(d.pos[1]).extent;
  const int64_t g_ = d.pos[0], co_ = d.pos[1], ci_ = d.pos[2], kh_ = d.pos[3], kw_ = d.pos[4],
                n_ = d.pos[5], oh_ = d.pos[6], ow_ = d.pos[7];
  const Operand &xo = op.inputs[0], &yo = op.inputs[1], &wo = op.results[0];
  Geom geo(op);
  geo.s0 = coef(xo, 2, oh_);
  geo.s1 = coef(xo, 3, ow_);
  geo.d0 = coef(xo, 2, kh_);
  geo.d1 = coef(xo, 3, kw_);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{n_, 1}}) || !row_is(xo, 1, {{g_, cig}, {ci_, 1}}) ||
      !row_is(xo, 2, {{oh_, geo.s0}, {kh_, geo.d0}}, -geo.p0) ||
      !row_is(xo, 3, {{ow_, geo.s1}, {kw_, geo.d1}}, -geo.p1) || !row_is(yo, 0, {{n_, 1}}) ||
      !row_is(yo, 1, {{g_, cog}, {co_, 1}}) || !row_is(yo, 2, {{oh_, 1}}) ||
      !row_is(yo, 3, {{ow_, 1}}) || !row_is(wo, 0, {{g_, cog}, {co_, 1}}) ||
      !row_is(wo, 1, {{ci_, 1}}) || !row_is(wo, 2, {{kh_, 1}}) || !row_is(wo, 3, {{kw_, 1}}))
    return false;
  if (geo.d0 < 1 || geo.d1 < 1) return false;
  Range rg = d.range(box, 0), co = d.range(box, 1), ci = d.range(box, 2), kh = d.range(box, 3),
        kw = d.range(box, 4), rn = d.range(box, 5), oh = d.range(box, 6), ow = d.range(box, 7);
  const int64_t KH = op.space.dim(kh_).extent, KW = op.space.dim(kw_).extent;
  if (kh.lo != 0 || kh.hi != KH || kw.lo != 0 || kw.hi != KW) return false;
  auto sh = span(oh.lo, oh.hi, geo.s0, geo.p0, geo.d0 * (KH - 1) + 1, X.org[2], X.ext[2]);
  auto sw = span(ow.lo, ow.hi, geo.s1, geo.p1, geo.d1 * (KW - 1) + 1, X.org[3], X.ext[3]);
  if (!sh || !sw) return false;
  ConvProblem c;
  c.N = rn.size();
  c.G = ci.size() == cig && co.size() == cog ? rg.size() : 1;
  c.IC = ci.size();
  c.OC = co.size();
  c.IH = sh->size;
  c.IW = sw->size;
  c.OH = oh.size();
  c.OW = ow.size();
  c.KH = KH;
  c.KW = KW;
  c.sh = geo.s0;
  c.sw = geo.s1;
  c.dh = geo.d0;
  c.dw = geo.d1;
  c.plh = sh->pad_l;
  c.plw = sw->pad_l;
  c.prh = sh->pad_r;
  c.prw = sw->pad_r;
  c.xs = strides4(X);
  c.ws = {cog * DW.st[0], DW.st[0], DW.st[1], DW.st[2], DW.st[3]};
  c.ys = strides4(DY);
  // One problem per group leaves the channels between the groups' ranges unwritten: they are
  // part of the output image, which a non-accumulating call resets.
  if (c.G < rg.size() && !o.accumulate) reset_output(op, box, *outs[0]);
  for (int64_t g = rg.lo; g < rg.hi; g += c.G) {
    const float* x = X.data + X.off(rn.lo, g * cig + ci.lo, sh->start, sw->start);
    const float* dy = DY.data + DY.off(rn.lo, g * cog + co.lo, oh.lo, ow.lo);
    float* dw = DW.data + DW.off(g * cog + co.lo, ci.lo, 0, 0);
    if (!run_plan(c, kBwdWeights, o, {x, dy}, dw)) return false;
  }
  return true;
}

// max/avg pooling over [n, c, oh, ow].
bool pool_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o) {
  if (box.rank() != 4) return false;
  Tile4 X(*ins[0]), Y(*outs[0]);
  const Operand &xo = op.inputs[0], &yo = op.results[0];
  const int64_t k[2] = {xo.proj.window()[2], xo.proj.window()[3]};
  Geom geo(op);
  geo.s0 = coef(xo, 2, 2);
  geo.s1 = coef(xo, 3, 3);
  geo.p0 = -xo.proj.map().offset()[2];
  geo.p1 = -xo.proj.map().offset()[3];
  if (!row_is(xo, 0, {{0, 1}}) || !row_is(xo, 1, {{1, 1}}) ||
      !row_is(xo, 2, {{2, geo.s0}}, -geo.p0, k[0]) || !row_is(xo, 3, {{3, geo.s1}}, -geo.p1, k[1]))
    return false;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(yo, r, {{r, 1}})) return false;
  Range rn{box.start()[0], box.end()[0]}, rc{box.start()[1], box.end()[1]},
      oh{box.start()[2], box.end()[2]}, ow{box.start()[3], box.end()[3]};
  auto sh = span(oh.lo, oh.hi, geo.s0, geo.p0, k[0], X.org[2], X.ext[2]);
  auto sw = span(ow.lo, ow.hi, geo.s1, geo.p1, k[1], X.org[3], X.ext[3]);
  if (!sh || !sw) return false;
  ConvProblem c;
  c.N = rn.size();
  c.IC = c.OC = rc.size();
  c.IH = sh->size;
  c.IW = sw->size;
  c.OH = oh.size();
  c.OW = ow.size();
  c.KH = k[0];
  c.KW = k[1];
  c.sh = geo.s0;
  c.sw = geo.s1;
  c.plh = sh->pad_l;
  c.plw = sw->pad_l;
  c.prh = sh->pad_r;
  c.prw = sw->pad_r;
  c.xs = strides4(X);
  c.ys = strides4(Y);
  const float* x = X.data + X.off(rn.lo, rc.lo, sh->start, sw->start);
  float* y = Y.data + Y.off(rn.lo, rc.lo, oh.lo, ow.lo);
  return run_plan(c, kPoolFwd, o, {x}, y, op.kind == OpKind::kMaxPool2d);
}

// pool2d_grad over [n, c, ih, iw], for boxes over the whole input plane.
bool pool_grad(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs, const KernelOptions& o) {
  if (box.rank() != 4) return false;
  Tile4 DY(*ins[0]), X(*ins[1]), DX(*outs[0]);
  const IVec &yw = op.inputs[0].proj.window(), &xw = op.inputs[1].proj.window();
  const int64_t OH = yw[2], OW = yw[3], H = xw[2], Wd = xw[3];
  if (X.org[2] != 0 || X.org[3] != 0 || X.ext[2] != H || X.ext[3] != Wd || DY.org[2] != 0 ||
      DY.org[3] != 0 || DY.ext[2] != OH || DY.ext[3] != OW)
    return false;
  for (int64_t r = 0; r < 2; ++r)
    if (!row_is(op.inputs[0], r, {{r, 1}}) || !row_is(op.inputs[1], r, {{r, 1}})) return false;
  if (!row_is(op.inputs[0], 2, {}, 0, OH) || !row_is(op.inputs[0], 3, {}, 0, OW) ||
      !row_is(op.inputs[1], 2, {}, 0, H) || !row_is(op.inputs[1], 3, {}, 0, Wd))
    return false;
  for (int64_t r = 0; r < 4; ++r)
    if (!row_is(op.results[0], r, {{r, 1}})) return false;
  if (box.start()[2] != 0 || box.end()[2] != H || box.start()[3] != 0 || box.end()[3] != Wd)
    return false;
  const bool mx = attr_s(op, "mode") == "max";
  auto k = attr_ints(op, "kernel", {1, 1});
  if (k.size() != 2) return false;
  Geom geo(op);
  const int64_t need_h = (OH - 1) * geo.s0 - geo.p0 + k[0],
                need_w = (OW - 1) * geo.s1 - geo.p1 + k[1];
  Range rn{box.start()[0], box.end()[0]}, rc{box.start()[1], box.end()[1]};
  ConvProblem c;
  c.N = rn.size();
  c.IC = c.OC = rc.size();
  c.IH = std::min(H, need_h);
  c.IW = std::min(Wd, need_w);
  if (c.IH <= 0 || c.IW <= 0) return false;
  c.OH = OH;
  c.OW = OW;
  c.KH = k[0];
  c.KW = k[1];
  c.sh = geo.s0;
  c.sw = geo.s1;
  c.plh = geo.p0;
  c.plw = geo.p1;
  c.prh = need_h - c.IH;
  c.prw = need_w - c.IW;
  c.xs = strides4(DX);
  c.ys = strides4(DY);
  // Only max pooling reads x; its view must have the gradient's layout (one src desc for both).
  if (mx && strides4(X) != c.xs) return false;
  if (c.IH < H || c.IW < Wd) reset_output(op, box, *outs[0]);
  const float* dy = DY.data + DY.off(rn.lo, rc.lo, 0, 0);
  const float* x = X.data + X.off(rn.lo, rc.lo, 0, 0);
  float* dx = DX.data + DX.off(rn.lo, rc.lo, 0, 0);
  return mx ? run_plan(c, kPoolBwd, o, {dy, x}, dx, true) : run_plan(c, kPoolBwd, o, {dy}, dx);
}

}  // namespace

bool run_conv_dnnl(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                   const std::vector<Tensor*>& outs, const KernelOptions& o) {
  for (const Tensor* t : ins)
    if (t->is_int() || t->rank() != 4) return false;
  if (outs.size() != 1 || outs[0]->rank() != 4) return false;
  switch (op.kind) {
    case OpKind::kConv2d:
      return conv_forward(op, box, ins, outs, o);
    case OpKind::kConv2dGradInput:
      return conv_grad_input(op, box, ins, outs, o);
    case OpKind::kConv2dGradWeight:
      return conv_grad_weight(op, box, ins, outs, o);
    case OpKind::kMaxPool2d:
    case OpKind::kAvgPool2d:
      return pool_forward(op, box, ins, outs, o);
    case OpKind::kPool2dGrad:
      return pool_grad(op, box, ins, outs, o);
    default:
      return false;
  }
}

}  // namespace heddle::kdetail

namespace heddle::kernels {

int64_t onednn_calls() { return kdetail::served.load(std::memory_order_relaxed); }

}  // namespace heddle::kernels
