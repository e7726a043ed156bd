// oneDNN convolution and pooling kernels, forward and backward, on local boxes. A box becomes
// one oneDNN problem (or one per group when its channel ranges do not tile the groups): the
// operands are strided views of the tiles, and the spatial window of a sub-box becomes a view of
// the tile rows it reads plus explicit padding for the rows outside the tile (the tensor's padding,
// or the far side of a halo: both read as zero, as in the direct loops). Primitives are created
// once per shape and thread count and cached; the operands are reordered to and from the layouts
// oneDNN picks (blocked formats for the jit kernels) on each call, through per-thread buffers,
// except convolution weights the caller marks unchanged, whose reordered copy is kept. The weights
// of large 1x1 convolutions and their gradients are reordered by own loops
// (KernelDnnlReorder.cpp), faster than oneDNN 2.6's reorders for those.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "KernelConvForm.h"
#include "KernelDnnlReorder.h"
#include "KernelUtil.h"

namespace heddle::kdetail {

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

namespace {

using namespace convform;
using dnnl::memory;
using Tag = memory::format_tag;
using MDims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

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
// (`prim`); a reorder between them when they differ (or to add into the output, `sum`).
struct Port {
  int arg = 0;
  memory::desc user, prim;
  std::optional<dnnl::reorder> reorder;
  memory::desc reorder_scratch;
  bool sum = false;
  // The reorder runs as own_reorder when that handles the pair: set for the weights (and weight
  // gradients) of large 1x1 convolutions (see kOwnReorderMin).
  bool own = false;
};

struct Plan {
  dnnl::primitive prim;
  memory::desc scratch;
  std::vector<Port> ins;
  Port out;
  // Max pooling gradient: the forward pass that records the workspace of argmax positions.
  std::optional<dnnl::primitive> pre;
  // Binary post-ops (a fused epilogue): the argument and layout of each one's second operand.
  std::vector<std::pair<int, memory::desc>> post;
  memory::desc pre_dst, pre_scratch, workspace;
  // The implementation oneDNN chose is its im2col + gemm path (not a jit kernel).
  bool gemm = false;
  // A pooling implementation of plain loops (simple_nchw: no jit kernel takes NCHW pooling on
  // AVX2-only hosts).
  bool plain = false;
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
  Port p{arg, user, prim, std::nullopt, {}, sum};
  if (user == prim && !sum) return p;
  dnnl::primitive_attr a = user_scratchpad();
  if (sum) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    a.set_post_ops(po);
  }
  auto pd = to_user ? dnnl::reorder::primitive_desc(dnnl_engine(), prim, dnnl_engine(), user, a)
                    : dnnl::reorder::primitive_desc(dnnl_engine(), user, dnnl_engine(), prim, a);
  p.reorder = dnnl::reorder(pd);
  p.reorder_scratch = pd.scratchpad_desc();
  return p;
}

memory scratch_memory(const memory::desc& d) {
  return memory(d, dnnl_engine(), buffer(4, d.get_size()));
}

// Convolution weights in the layout the primitive wants, kept per thread across calls: reordering
// ResNet-50's 94 MB of weights into oneDNN's blocked layouts on every call took longer than the
// convolutions themselves. An entry is reused only when the caller says the weights are unchanged
// (KernelOptions::unchanged_inputs); otherwise the call reorders into it afresh.
struct ReorderedWeights {
  memory::desc user, prim;
  int64_t epoch = -1;       // products_forward_epoch() when made
  std::vector<float> data;  // the reordered weights, 64-byte aligned inside
  float* aligned() {
    auto q = reinterpret_cast<uintptr_t>(data.data());
    return reinterpret_cast<float*>((q + 63) & ~uintptr_t{63});
  }
};

constexpr size_t kWeightCacheBytes = size_t{1} << 30;  // per thread; cleared when exceeded

// The reordered weights for port `pt` (a weights port with a reorder) and user weights `w`;
// `unchanged`: w holds what it held when the entry was last made.
float* reordered_weights(const Port& pt, const float* w, bool unchanged, dnnl::stream& s) {
  thread_local std::map<std::pair<const Port*, const float*>, ReorderedWeights> cache;
  thread_local size_t cached_bytes = 0;
  auto key = std::make_pair(&pt, w);
  auto it = cache.find(key);
  const int64_t epoch = products_forward_epoch();
  if (it != cache.end() && unchanged && it->second.user == pt.user && it->second.prim == pt.prim &&
      it->second.epoch == epoch)
    return it->second.aligned();
  if (it == cache.end()) {
    const size_t need = pt.prim.get_size() + 64;
    if (cached_bytes + need > kWeightCacheBytes) {
      cache.clear();
      cached_bytes = 0;
    }
    cached_bytes += need;
    it = cache.emplace(key, ReorderedWeights{}).first;
  }
  ReorderedWeights& e = it->second;
  if (e.data.empty() || e.user != pt.user || e.prim != pt.prim) {
    // Zeros in the blocks' padding, which own_reorder leaves as it finds them.
    e.data.assign(pt.prim.get_size() / sizeof(float) + 16, 0.0f);
    e.user = pt.user;
    e.prim = pt.prim;
  }
  e.epoch = epoch;
  if (pt.own && own_reorder(pt.user, w, pt.prim, e.aligned(), false, true)) return e.aligned();
  memory u(pt.user, dnnl_engine(), const_cast<float*>(w)), t(pt.prim, dnnl_engine(), e.aligned());
  pt.reorder->execute(s, {{DNNL_ARG_FROM, u},
                          {DNNL_ARG_TO, t},
                          {DNNL_ARG_SCRATCHPAD, scratch_memory(pt.reorder_scratch)}});
  return e.aligned();
}

// Runs plan `p` on operands `in` (in p.ins order) into `out`; `weights_unchanged` as for
// reordered_weights; `post`: the second operands of p.post, in order.
void execute(const Plan& p, const std::vector<const float*>& in, float* out, bool weights_unchanged,
             const std::vector<const float*>& post = {}) {
  dnnl::stream& s = dnnl_stream();
  std::unordered_map<int, memory> args;
  for (size_t k = 0; k < p.post.size(); ++k)
    args[p.post[k].first] = memory(p.post[k].second, dnnl_engine(), const_cast<float*>(post[k]));
  for (size_t i = 0; i < p.ins.size(); ++i) {
    const Port& pt = p.ins[i];
    memory u(pt.user, dnnl_engine(), const_cast<float*>(in[i]));
    if (!pt.reorder) {
      args[pt.arg] = u;
      continue;
    }
    if (pt.arg == DNNL_ARG_WEIGHTS) {
      args[pt.arg] =
          memory(pt.prim, dnnl_engine(), reordered_weights(pt, in[i], weights_unchanged, s));
      continue;
    }
    memory t(pt.prim, dnnl_engine(), buffer(static_cast<int>(i), pt.prim.get_size()));
    pt.reorder->execute(s, {{DNNL_ARG_FROM, u},
                            {DNNL_ARG_TO, t},
                            {DNNL_ARG_SCRATCHPAD, scratch_memory(pt.reorder_scratch)}});
    args[pt.arg] = t;
  }
  if (p.pre) {  // max pooling gradient: recompute the forward pass for its workspace
    memory ws(p.workspace, dnnl_engine(), buffer(5, p.workspace.get_size()));
    memory dst(p.pre_dst, dnnl_engine(), buffer(3, p.pre_dst.get_size()));
    p.pre->execute(s, {{DNNL_ARG_SRC, args.at(DNNL_ARG_SRC)},
                       {DNNL_ARG_DST, dst},
                       {DNNL_ARG_WORKSPACE, ws},
                       {DNNL_ARG_SCRATCHPAD, scratch_memory(p.pre_scratch)}});
    args.erase(DNNL_ARG_SRC);
    args[DNNL_ARG_WORKSPACE] = ws;
  }
  memory u(p.out.user, dnnl_engine(), out);
  memory t =
      p.out.reorder ? memory(p.out.prim, dnnl_engine(), buffer(3, p.out.prim.get_size())) : u;
  args[p.out.arg] = t;
  args[DNNL_ARG_SCRATCHPAD] = scratch_memory(p.scratch);
  p.prim.execute(s, args);
  if (p.out.reorder && p.out.own) {
    s.wait();
    if (own_reorder(p.out.prim, static_cast<const float*>(t.get_data_handle()), p.out.user, out,
                    p.out.sum, false))
      return;
  }
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
  // The descriptor `D` of a direct convolution over the problem (forward, backward data or
  // backward weights), after `lead` (the forward's prop kind), in the layouts oneDNN picks.
  template <class D, class... Lead>
  D desc(Lead... lead) const {
    return D(lead..., dnnl::algorithm::convolution_direct, any({N, G * IC, IH, IW}), any(wdims()),
             any({N, G * OC, OH, OW}), {sh, sw}, {dh - 1, dw - 1}, {plh, plw}, {prh, prw});
  }
};

std::atomic<int64_t> served{0};

enum Kind : int { kFwd = 1, kBwdData, kBwdWeights, kPoolFwd, kPoolBwd };

// The post-ops of epilogue `ep` (binary operands per output channel), their operands' arguments
// and layouts into p.post.
dnnl::post_ops post_ops(const ConvProblem& c, const std::vector<PostOp>& ep, Plan& p) {
  dnnl::post_ops po;
  for (const PostOp& e : ep) {
    const int k = po.len();
    switch (e.kind) {
      case PostOp::kRelu:
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        continue;
      case PostOp::kSigmoid:
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
        continue;
      case PostOp::kSwish:
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
        continue;
      default:
        break;
    }
    const auto alg = e.kind == PostOp::kAdd   ? dnnl::algorithm::binary_add
                     : e.kind == PostOp::kMul ? dnnl::algorithm::binary_mul
                     : e.kind == PostOp::kMax ? dnnl::algorithm::binary_max
                                              : dnnl::algorithm::binary_min;
    memory::desc d({1, c.G * c.OC, 1, 1}, kF32, Tag::nchw);
    po.append_binary(alg, d);
    p.post.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(k) | DNNL_ARG_SRC_1, d);
  }
  return po;
}

// The weights (elements) of a 1x1 convolution from which own_reorder moves them into and out of
// oneDNN's blocked layouts. From 2^19 (ResNet-50's 1024x512 and larger, cold in memory as in a
// training step) it took 15-70% less CPU time than oneDNN 2.6's reorders (2048x1024 into
// `Acdb48a`: 1.6 against 5.6 ms, the gradient out of `ABcd16b16a`: 1.8 against 5.6 ms); below it
// (MobileNetV2's, ResNet-50's 1024x256) and for 3x3 weights oneDNN's were as fast or faster.
constexpr int64_t kOwnReorderMin = int64_t{1} << 19;

Plan conv_plan(const ConvProblem& c, Kind kind, bool acc, const std::vector<PostOp>* ep = nullptr) {
  Plan p;
  const bool own = c.KH == 1 && c.KW == 1 && c.G * c.OC * c.IC >= kOwnReorderMin;
  dnnl::primitive_attr attr = user_scratchpad();
  if (ep) attr.set_post_ops(post_ops(c, *ep, p));
  if (kind == kFwd) {
    dnnl::convolution_forward::primitive_desc pd(
        c.desc<dnnl::convolution_forward::desc>(dnnl::prop_kind::forward_inference), attr,
        dnnl_engine());
    p.prim = dnnl::convolution_forward(pd);
    p.scratch = pd.scratchpad_desc();
    p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false),
             make_port(DNNL_ARG_WEIGHTS, c.wts(), pd.weights_desc(), false)};
    p.ins[1].own = own;
    p.out = make_port(DNNL_ARG_DST, c.dst(), pd.dst_desc(), true, acc);
    p.gemm = std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
    return p;
  }
  dnnl::convolution_forward::primitive_desc hint(
      c.desc<dnnl::convolution_forward::desc>(dnnl::prop_kind::forward_training), dnnl_engine());
  if (kind == kBwdData) {
    dnnl::convolution_backward_data::primitive_desc pd(
        c.desc<dnnl::convolution_backward_data::desc>(), attr, dnnl_engine(), hint);
    p.prim = dnnl::convolution_backward_data(pd);
    p.scratch = pd.scratchpad_desc();
    p.ins = {make_port(DNNL_ARG_DIFF_DST, c.dst(), pd.diff_dst_desc(), false),
             make_port(DNNL_ARG_WEIGHTS, c.wts(), pd.weights_desc(), false)};
    p.ins[1].own = own;
    p.out = make_port(DNNL_ARG_DIFF_SRC, c.src(), pd.diff_src_desc(), true, acc);
    return p;
  }
  dnnl::convolution_backward_weights::primitive_desc pd(
      c.desc<dnnl::convolution_backward_weights::desc>(), attr, dnnl_engine(), hint);
  p.prim = dnnl::convolution_backward_weights(pd);
  p.scratch = pd.scratchpad_desc();
  p.gemm = std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
  p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false),
           make_port(DNNL_ARG_DIFF_DST, c.dst(), pd.diff_dst_desc(), false)};
  p.out = make_port(DNNL_ARG_DIFF_WEIGHTS, c.wts(), pd.diff_weights_desc(), true, acc);
  p.out.own = own;
  return p;
}

// True for oneDNN's pooling implementations of plain loops (no jit kernel).
bool plain_impl(const std::string& impl) {
  return impl.find("simple") != std::string::npos || impl.find("ref") != std::string::npos;
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
                                             dnnl_engine());
    p.prim = dnnl::pooling_forward(pd);
    p.scratch = pd.scratchpad_desc();
    p.plain = plain_impl(pd.impl_info_str());
    p.ins = {make_port(DNNL_ARG_SRC, c.src(), pd.src_desc(), false)};
    p.out = make_port(DNNL_ARG_DST, c.dst(), pd.dst_desc(), true);
    return p;
  }
  dnnl::pooling_forward::primitive_desc hint(fwd(dnnl::prop_kind::forward_training), attr,
                                             dnnl_engine());
  dnnl::pooling_backward::desc d(alg, src, dst, {c.sh, c.sw}, {c.KH, c.KW}, {c.plh, c.plw},
                                 {c.prh, c.prw});
  dnnl::pooling_backward::primitive_desc pd(d, attr, dnnl_engine(), hint);
  p.prim = dnnl::pooling_backward(pd);
  p.scratch = pd.scratchpad_desc();
  p.plain = plain_impl(pd.impl_info_str()) || (mx && plain_impl(hint.impl_info_str()));
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

constexpr int64_t kSmallWork = int64_t{1} << 20;

// The cached plan of problem `c` (null: oneDNN has none) for `o.threads` cores, with the second
// operands of epilogue `ep` (a forward convolution's, or null) into *post; sets oneDNN's
// OpenMP threads for the call.
std::shared_ptr<const Plan> find_plan(const ConvProblem& c, Kind kind, const KernelOptions& o,
                                      bool mx, const std::vector<PostOp>* ep,
                                      std::vector<const float*>* post) {
  // Problems under kSmallWork multiply-adds take one thread: a second one saves less than the
  // wake-up and barrier of a parallel region cost (more so on a busy host).
  const int64_t taps = kind == kPoolFwd || kind == kPoolBwd ? c.KH * c.KW : c.IC * c.KH * c.KW;
  const bool small = c.N * c.G * c.OC * c.OH * c.OW * taps < kSmallWork;
  const int threads = small ? 1 : std::max(1, o.threads);
  omp_set_num_threads(threads);
  // Pooling has no reduce dims: it overwrites even when accumulating.
  const bool pool = kind == kPoolFwd || kind == kPoolBwd;
  const bool acc = o.accumulate && !pool;
  std::vector<int64_t> key = c.key(kind + (mx ? 16 : 0), acc, threads);
  if (ep) {
    key.push_back(-1);  // the epilogue's kinds follow
    for (const PostOp& e : *ep) {
      key.push_back(e.kind);
      if (!e.channel.empty() && post) post->push_back(e.channel.data());
    }
  }
  return cached(key, [&] { return pool ? pool_plan(c, kind, mx) : conv_plan(c, kind, acc, ep); });
}

// `ep`: a forward convolution's epilogue (binary operands' data in it), or null.
bool run_plan(const ConvProblem& c, Kind kind, const KernelOptions& o,
              const std::vector<const float*>& in, float* out, bool mx = false,
              bool weights_unchanged = false, const std::vector<PostOp>* ep = nullptr) {
  std::vector<const float*> post;
  auto plan = find_plan(c, kind, o, mx, ep, &post);
  if (!plan) return false;
  execute(*plan, in, out, weights_unchanged, post);
  served.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Resets the image of `box` under result 0 (for kernels that write only part of it).
void reset_output(const Op& op, const Box& box, Tensor& out) {
  Tensor z = Tensor::tile(out.dtype(), op.results[0].proj.image(box));
  out.copy_from(z);
}

// The problem for `n` images and `g` groups of `ic` -> `oc` channels, outputs `oh` x `ow` and
// taps `kh` x `kw` at the strides of `geo` (and its dilations when `dilated`; pooling has none).
// The input window and its padding come from clip or plane.
ConvProblem problem(int64_t n, int64_t g, int64_t ic, int64_t oc, int64_t oh, int64_t ow,
                    int64_t kh, int64_t kw, const Geom& geo, bool dilated) {
  ConvProblem c;
  c.N = n;
  c.G = g;
  c.IC = ic;
  c.OC = oc;
  c.OH = oh;
  c.OW = ow;
  c.KH = kh;
  c.KW = kw;
  c.sh = geo.s0;
  c.sw = geo.s1;
  if (dilated) {
    c.dh = geo.d0;
    c.dw = geo.d1;
  }
  return c;
}

// The strides of a ([g,] oc, ic, kh, kw) view of the weight tile `w`, `cog` channels a group.
MDims group_strides(const Tile4& w, int64_t cog) {
  return {cog * w.st[0], w.st[0], w.st[1], w.st[2], w.st[3]};
}

// The window of tile `x` that outputs `oh` x `ow` read (padding for the rows and columns outside
// the tile), into `c`; the (row, column) where it starts, or nullopt when no tap reads the tile.
std::optional<std::pair<int64_t, int64_t>> clip(ConvProblem& c, const Tile4& x, Range oh, Range ow,
                                                const Geom& geo) {
  auto sh = span(oh.lo, oh.hi, c.sh, geo.p0, c.dh * (c.KH - 1) + 1, x.org[2], x.ext[2]);
  auto sw = span(ow.lo, ow.hi, c.sw, geo.p1, c.dw * (c.KW - 1) + 1, x.org[3], x.ext[3]);
  if (!sh || !sw) return std::nullopt;
  c.IH = sh->size;
  c.IW = sw->size;
  c.plh = sh->pad_l;
  c.plw = sw->pad_l;
  c.prh = sh->pad_r;
  c.prw = sw->pad_r;
  return std::pair{sh->start, sw->start};
}

// The whole input plane `h` x `w` into `c`, cut after the last window's rows and columns (they
// get no gradient); false when nothing is left.
bool plane(ConvProblem& c, int64_t h, int64_t w, const Geom& geo) {
  const int64_t need_h = (c.OH - 1) * c.sh - geo.p0 + c.dh * (c.KH - 1) + 1,
                need_w = (c.OW - 1) * c.sw - geo.p1 + c.dw * (c.KW - 1) + 1;
  c.IH = std::min(h, need_h);
  c.IW = std::min(w, need_w);
  if (c.IH <= 0 || c.IW <= 0) return false;
  c.plh = geo.p0;
  c.plw = geo.p1;
  c.prh = need_h - c.IH;
  c.prw = need_w - c.IW;
  return true;
}

// Where a convolution's views start: the src (image), weights and dst tiles in oneDNN's roles, the
// first image, the channels per group and the box's first channels, and the first row and column
// of the src and dst views.
struct ConvAt {
  const Tile4 &src, &wts, &dst;
  int64_t n, cig, cog, ci, co, h, w, oh, ow;
};

// True when `ep` has a binary step (a value per channel).
bool has_binary(const std::vector<PostOp>& ep) {
  return std::any_of(ep.begin(), ep.end(), [](const PostOp& e) { return e.kind <= PostOp::kMin; });
}

// Forward `c` (one problem for all its groups, strides set) from x and w into y with epilogue
// `ep` applied by own loops after it, plane by plane, when oneDNN would run the fused problem
// through its im2col + gemm path: that path applies binary post-ops by reference loops, element
// by element (AlexNet's first convolution, 11x11 taps on 3 channels, which oneDNN's AVX2 jit
// kernels do not take: 120 ms with its bias and ReLU as post-ops against 14 ms without, one
// thread, AMD EPYC; ResNeXt-50's 3x3 convolutions of 4 channels a group likewise). False
// (nothing written) otherwise.
bool run_gemm_unfused(const ConvProblem& c, const KernelOptions& o, const float* x, const float* w,
                      float* y, bool weights_unchanged, const std::vector<PostOp>& ep) {
  if (!has_binary(ep)) return false;
  auto fused = find_plan(c, kFwd, o, false, &ep, nullptr);
  if (!fused || !fused->gemm) return false;
  if (!run_plan(c, kFwd, o, {x, w}, y, false, weights_unchanged)) return false;
  // Runs of `len` contiguous outputs: whole planes, rows, or single points.
  const int64_t C = c.G * c.OC, planes = c.N * C;
  const bool whole = c.ys[3] == 1 && c.ys[2] == c.OW, row = c.ys[3] == 1;
  const int64_t len = whole ? c.OH * c.OW : row ? c.OW : 1, runs = c.OH * c.OW / len;
  const int threads = std::max(1, o.threads);
#pragma omp parallel for num_threads(threads) if (threads > 1 && planes * c.OH * c.OW >= 8192)
  for (int64_t q = 0; q < planes; ++q)
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t h = whole ? 0 : row ? r : r / c.OW, v = whole || row ? 0 : r % c.OW;
      apply_epilogue(ep, q % C,
                     y + (q / C) * c.ys[0] + (q % C) * c.ys[1] + h * c.ys[2] + v * c.ys[3], len);
    }
  return true;
}

// Runs `c` of `kind` on the views of `at`, once for all the groups of `rg` or once per group step
// of c.G (the view strides are set here); false when oneDNN has no implementation.
// `weights_unchanged`: the weights tile is unchanged since the caller's last call (forward only);
// `ep`: the forward's epilogue (one problem for all groups only).
bool run_groups(ConvProblem c, Kind kind, const KernelOptions& o, Range rg, const ConvAt& at,
                bool weights_unchanged = false, const std::vector<PostOp>* ep = nullptr) {
  c.xs = strides4(at.src);
  c.ws = group_strides(at.wts, at.cog);
  c.ys = strides4(at.dst);
  for (int64_t g = rg.lo; g < rg.hi; g += c.G) {
    float* x = at.src.data + at.src.off(at.n, g * at.cig + at.ci, at.h, at.w);
    float* w = at.wts.data + at.wts.off(g * at.cog + at.co, at.ci, 0, 0);
    float* y = at.dst.data + at.dst.off(at.n, g * at.cog + at.co, at.oh, at.ow);
    if (kind == kFwd && ep && run_gemm_unfused(c, o, x, w, y, weights_unchanged, *ep)) continue;
    const bool ok = kind == kFwd ? run_plan(c, kind, o, {x, w}, y, false, weights_unchanged, ep)
                    : kind == kBwdData ? run_plan(c, kind, o, {y, w}, x)
                                       : run_plan(c, kind, o, {x, y}, w);
    if (!ok) return false;
  }
  return true;
}

// conv2d over [n, (g), co, oh, ow, ci:sum], with epilogue `ep` when non-null (then false unless
// all the box's groups make one problem).
bool conv_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o,
                  const std::vector<PostOp>* ep = nullptr) {
  auto form = conv_forward_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, W, Y, geo, KH, KW, cig, cog, rn, rg, co, oh, ow, ci] = *form;
  // All groups of the box in one problem when their channel ranges are whole, else one each.
  const bool whole = ci.size() == cig && co.size() == cog;
  ConvProblem c = problem(rn.size(), whole ? rg.size() : 1, ci.size(), co.size(), oh.size(),
                          ow.size(), KH, KW, geo, true);
  auto at = clip(c, X, oh, ow, geo);
  if (!at) return false;
  if (ep) {
    if (c.G < rg.size() || o.accumulate) return false;
    for (const PostOp& e : *ep)
      if (!e.channel.empty() && static_cast<int64_t>(e.channel.size()) != c.G * c.OC) return false;
  }
  // One problem per group leaves the channels between the groups' ranges unwritten: they are
  // part of the output image, which a non-accumulating call resets.
  if (c.G < rg.size() && !o.accumulate) reset_output(op, box, *outs[0]);
  return run_groups(c, kFwd, o, rg,
                    {X, W, Y, rn.lo, cig, cog, ci.lo, co.lo, at->first, at->second, oh.lo, ow.lo},
                    (o.unchanged_inputs >> 1) & 1u, ep);
}

// conv2d_grad_input over [n, (g), ci, ih, iw, co:sum], for boxes over the whole input plane.
bool conv_grad_input(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs, const KernelOptions& o) {
  auto form = conv_grad_input_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [DY, W, DX, geo, OH, OW, KH, KW, H, Wd, cig, cog, rn, rg, ci, ih, iw, co] = *form;
  if (ih.lo != 0 || ih.hi != H || iw.lo != 0 || iw.hi != Wd) return false;
  ConvProblem c = problem(rn.size(), ci.size() == cig && co.size() == cog ? rg.size() : 1,
                          ci.size(), co.size(), OH, OW, KH, KW, geo, true);
  if (!plane(c, H, Wd, geo)) return false;
  // Rows past the last window, and with one problem per group the channels between the groups'
  // ranges, are part of the output image but not written: a non-accumulating call resets them.
  if ((c.IH < H || c.IW < Wd || c.G < rg.size()) && !o.accumulate) reset_output(op, box, *outs[0]);
  return run_groups(c, kBwdData, o, rg, {DX, W, DY, rn.lo, cig, cog, ci.lo, co.lo, 0, 0, 0, 0});
}

// conv2d_grad_weight over [(g), co, ci, kh, kw, n:sum, oh:sum, ow:sum], for boxes over all taps.
bool conv_grad_weight(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                      const std::vector<Tensor*>& outs, const KernelOptions& o) {
  auto form = conv_grad_weight_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, DY, DW, geo, KH, KW, cig, cog, rg, co, ci, kh, kw, rn, oh, ow] = *form;
  if (geo.d0 < 1 || geo.d1 < 1) return false;
  if (kh.lo != 0 || kh.hi != KH || kw.lo != 0 || kw.hi != KW) return false;
  ConvProblem c = problem(rn.size(), ci.size() == cig && co.size() == cog ? rg.size() : 1,
                          ci.size(), co.size(), oh.size(), ow.size(), KH, KW, geo, true);
  auto at = clip(c, X, oh, ow, geo);
  if (!at) return false;
  // A depthwise problem that oneDNN would run through its gemm path goes to the direct loops.
  if (cig == 1 && cog == 1 && c.G == rg.size() && c.G > 1) {
    ConvProblem v = c;
    v.xs = strides4(X);
    v.ws = group_strides(DW, cog);
    v.ys = strides4(DY);
    auto plan = find_plan(v, kBwdWeights, o, false, nullptr, nullptr);
    if ((!plan || plan->gemm) && run_depthwise_grad_weight(op, box, ins, outs, o)) {
      served.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  // One problem per group leaves the channels between the groups' ranges unwritten: they are
  // part of the output image, which a non-accumulating call resets.
  if (c.G < rg.size() && !o.accumulate) reset_output(op, box, *outs[0]);
  return run_groups(
      c, kBwdWeights, o, rg,
      {X, DW, DY, rn.lo, cig, cog, ci.lo, co.lo, at->first, at->second, oh.lo, ow.lo});
}

// max/avg pooling over [n, c, oh, ow].
bool pool_forward(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                  const std::vector<Tensor*>& outs, const KernelOptions& o) {
  auto form = pool_forward_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [X, Y, geo, k, rn, rc, oh, ow] = *form;
  ConvProblem c =
      problem(rn.size(), 1, rc.size(), rc.size(), oh.size(), ow.size(), k[0], k[1], geo, false);
  auto at = clip(c, X, oh, ow, geo);
  if (!at) return false;
  c.xs = strides4(X);
  c.ys = strides4(Y);
  const float* x = X.data + X.off(rn.lo, rc.lo, at->first, at->second);
  float* y = Y.data + Y.off(rn.lo, rc.lo, oh.lo, ow.lo);
  const bool mx = op.kind == OpKind::kMaxPool2d;
  // oneDNN's plain NCHW loops (the only NCHW pooling it has on AVX2-only hosts) took 10 ms for
  // AlexNet's first max pooling (2x64x55x55, 3x3 windows, stride 2) on an AMD EPYC (Zen 3) host,
  // where the own loops (run_conv_fast, which overwrite the box's outputs) took under a tenth.
  auto plan = find_plan(c, kPoolFwd, o, mx, nullptr, nullptr);
  if (plan && plan->plain) {
    if (!run_conv_fast(op, box, ins, outs)) return false;
    served.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return run_plan(c, kPoolFwd, o, {x}, y, mx);
}

// pool2d_grad over [n, c, ih, iw], for boxes over the whole input plane.
bool pool_grad(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
               const std::vector<Tensor*>& outs, const KernelOptions& o) {
  auto form = pool_grad_form(op, box, ins, outs);
  if (!form) return false;
  const auto& [DY, X, DX, geo, OH, OW, H, Wd, mx, k, rn, rc, ih, iw] = *form;
  if (ih.lo != 0 || ih.hi != H || iw.lo != 0 || iw.hi != Wd) return false;
  ConvProblem c = problem(rn.size(), 1, rc.size(), rc.size(), OH, OW, k[0], k[1], geo, false);
  if (!plane(c, H, Wd, geo)) return false;
  c.xs = strides4(DX);
  c.ys = strides4(DY);
  // Only max pooling reads x; its view must have the gradient's layout (one src desc for both).
  if (mx && strides4(X) != c.xs) return false;
  // oneDNN's plain NCHW loops took 13 ms for DenseNet-121's first max pooling's gradient
  // (8x64x32x32, 3x3 windows, stride 2) on the AMD EPYC (Zen 3) host: the own loops
  // (run_conv_fast) take max pooling's, as they take the forward's. Its plain average pooling
  // gradient was faster than the own loops (DenseNet's 2x2 transitions: 1.7 against 2.3 ms).
  auto plan = find_plan(c, kPoolBwd, o, mx, nullptr, nullptr);
  if (!plan) return false;
  if (mx && plan->plain) {  // the own loops add into the box's image: reset it first
    reset_output(op, box, *outs[0]);
    if (!run_conv_fast(op, box, ins, outs)) return false;
    served.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (c.IH < H || c.IW < Wd) reset_output(op, box, *outs[0]);
  const float* dy = DY.data + DY.off(rn.lo, rc.lo, 0, 0);
  const float* x = X.data + X.off(rn.lo, rc.lo, 0, 0);
  float* dx = DX.data + DX.off(rn.lo, rc.lo, 0, 0);
  return mx ? run_plan(c, kPoolBwd, o, {dy, x}, dx, true) : run_plan(c, kPoolBwd, o, {dy}, dx);
}

}  // namespace

bool run_conv_dnnl_fused(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                         Tensor& out, const std::vector<PostOp>& epilogue, const KernelOptions& o) {
  if (op.kind != OpKind::kConv2d || out.rank() != 4 || out.is_int()) return false;
  for (const Tensor* t : ins)
    if (t->is_int() || t->rank() != 4) return false;
  return conv_forward(op, box, ins, {&out}, o, &epilogue);
}

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
