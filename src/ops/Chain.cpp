// Fused elementwise chains: groups of consecutive elementwise calls over one box run row by row,
// a block of elements at a time through every op of the group; a value passed from one
// op of the group to a later one lives in a block buffer only. Operands are read in place when
// contiguous along the row, else gathered (broadcasts, strided or integer operands).
#include "heddle/ops/Chain.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "KernelConvForm.h"
#include "KernelParallel.h"
#include "KernelUtil.h"
#include "Scalar.h"
#include "Simd.h"

namespace heddle::kernels {

namespace {

using namespace kdetail;

// A block's elements: as many as keep the group's block buffers (one per op, one per operand)
// within kBlockFloats (16 KiB, half of a Zen 4 core's L1), between kMinBlock and kMaxBlock. Blocks
// of 1024 instead of 256 took a tenth off GELU and its gradient in the GPT step (8 interleaved
// runs: 0.85-0.91 against 0.98-1.00 ms, 1.36-1.44 against 1.52-1.56), where every chain has a few
// buffers; at 1024 for every group, MobileNetV2's training step (chains of a dozen buffers) took
// 3% longer, and with the buffers bounded no longer (42.0 / 42.9 against 42.6 / 48.4 ms).
constexpr int64_t kMinBlock = 256, kMaxBlock = 1024, kBlockFloats = 4096;

// What one fused op needs per block: its kind and attributes, precomputed.
struct FusedOp {
  const Op* op = nullptr;
  OpKind kind = OpKind::kIdentity, fn = OpKind::kIdentity;
  int wrt = 0;
  double alpha = 1.0;
  std::optional<CausalMask> mask;
};

bool supported_fn(OpKind f) {
  OpCategory c = op_kind_info(f).category;
  return c == OpCategory::kUnary || c == OpCategory::kBinary || f == OpKind::kWhere;
}

// out[j] = unary K of in[j].
template <OpKind K>
void unary_block(const float* x, float* out, int64_t n, double alpha) {
  for (int64_t j = 0; j < n; ++j) out[j] = unary_f<K>(x[j], alpha);
}

template <OpKind K>
void unary_grad_block(const float* dy, const float* x, float* out, int64_t n, double alpha) {
  for (int64_t j = 0; j < n; ++j) out[j] = dy[j] * unary_deriv_f<K>(x[j], alpha);
}

// out[j] = dy[j] times 1 where pass(a[j], b[j]), else times 0 (a clamp's gradient); the factor
// is picked as bits, so the loop vectorizes instead of branching on each comparison.
template <class P>
void pass_grad(const float* dy, const float* a, const float* b, float* out, int64_t n, P pass) {
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t bits = pass(a[j], b[j]) ? 0x3f800000u : 0u;  // 1.0f or 0.0f
    float k;
    std::memcpy(&k, &bits, sizeof k);
    out[j] = dy[j] * k;
  }
}

// out = unary kind k of x (the vector loops of Simd.h for the costly activations, else
// constant-kind loops for the fast kinds, as KernelPointwise.cpp).
void unary(OpKind k, const float* x, float* out, int64_t n, double alpha, const float* dy) {
  if (k == OpKind::kRelu && dy) {  // dy times unary_deriv's 1 or 0, as unary_grad_block
    pass_grad(dy, x, x, out, n, [](float p, float) { return p > 0.0f; });
    return;
  }
  if (simd_activation(k)) {
    if (dy)
      activation_grad_simd(k, dy, x, out, n);
    else
      activation_simd(k, x, out, n);
    return;
  }
#define HEDDLE_CHAIN_UNARY(K)                            \
  case OpKind::K:                                        \
    if (dy)                                              \
      unary_grad_block<OpKind::K>(dy, x, out, n, alpha); \
    else                                                 \
      unary_block<OpKind::K>(x, out, n, alpha);          \
    return;
  switch (k) {
    HEDDLE_CHAIN_UNARY(kRelu)
    HEDDLE_CHAIN_UNARY(kGelu)
    HEDDLE_CHAIN_UNARY(kGeluTanh)
    HEDDLE_CHAIN_UNARY(kSilu)
    HEDDLE_CHAIN_UNARY(kSigmoid)
    HEDDLE_CHAIN_UNARY(kTanh)
    HEDDLE_CHAIN_UNARY(kExp)
    HEDDLE_CHAIN_UNARY(kScale)
    HEDDLE_CHAIN_UNARY(kNeg)
    HEDDLE_CHAIN_UNARY(kSquare)
    HEDDLE_CHAIN_UNARY(kIdentity)
    HEDDLE_CHAIN_UNARY(kCast)
    default:
      break;
  }
#undef HEDDLE_CHAIN_UNARY
  if (dy)
    for (int64_t j = 0; j < n; ++j)
      out[j] = static_cast<float>(dy[j] * unary_deriv(k, x[j], alpha));
  else
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(unary_value(k, x[j], alpha));
}

void binary(OpKind k, const float* a, const float* b, float* out, int64_t n) {
  switch (k) {
    case OpKind::kAdd:
      for (int64_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
      return;
    case OpKind::kSub:
      for (int64_t j = 0; j < n; ++j) out[j] = a[j] - b[j];
      return;
    case OpKind::kMul:
      for (int64_t j = 0; j < n; ++j) out[j] = a[j] * b[j];
      return;
    case OpKind::kMaximum:  // exact in float: binary_value's double max and min
      for (int64_t j = 0; j < n; ++j) out[j] = std::max(a[j], b[j]);
      return;
    case OpKind::kMinimum:
      for (int64_t j = 0; j < n; ++j) out[j] = std::min(a[j], b[j]);
      return;
    default:
      for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(binary_value(k, a[j], b[j]));
  }
}

// One block of op `f`: in[i] holds input i's n values, out gets the result's; the block starts
// at offset j0 of the row at p.
void eval(const FusedOp& f, const std::vector<const float*>& in, float* out, int64_t n,
          const int64_t* p, int64_t j0) {
  const OpCategory cat = op_kind_info(f.kind).category;
  // The operands as locals: a store to out[j] cannot change them, so the loops vectorize.
  const float* x0 = in.empty() ? nullptr : in[0];
  const float* x1 = in.size() > 1 ? in[1] : nullptr;
  const float* x2 = in.size() > 2 ? in[2] : nullptr;
  if (f.kind == OpKind::kCausalMask ||
      (f.kind == OpKind::kElementwiseGrad && f.fn == OpKind::kCausalMask)) {
    float hide = f.kind == OpKind::kCausalMask ? -std::numeric_limits<float>::infinity() : 0.0f;
    int64_t v = f.mask->visible_prefix(p, j0, n);
    if (v >= 0) {  // a prefix passes, the rest is hidden
      std::copy(in[0], in[0] + v, out);
      std::fill(out + v, out + n, hide);
      return;
    }
    for (int64_t j = 0; j < n; ++j) out[j] = f.mask->hidden(p, j0 + j) ? hide : x0[j];
  } else if (f.kind == OpKind::kWhere) {
    for (int64_t j = 0; j < n; ++j) out[j] = x0[j] != 0.0f ? x1[j] : x2[j];
  } else if (f.kind != OpKind::kElementwiseGrad) {
    if (cat == OpCategory::kUnary)
      unary(f.kind, in[0], out, n, f.alpha, nullptr);
    else
      binary(f.kind, in[0], in[1], out, n);
  } else if (op_kind_info(f.fn).category == OpCategory::kUnary) {
    unary(f.fn, in[1], out, n, f.alpha, in[0]);
  } else if (f.fn == OpKind::kWhere) {
    for (int64_t j = 0; j < n; ++j) out[j] = (f.wrt == 1) == (x1[j] != 0.0f) ? x0[j] : 0.0f;
  } else if (f.fn == OpKind::kAdd || (f.fn == OpKind::kSub && f.wrt == 0)) {
    std::copy(in[0], in[0] + n, out);
  } else if (f.fn == OpKind::kSub) {
    for (int64_t j = 0; j < n; ++j) out[j] = -x0[j];
  } else if (f.fn == OpKind::kMul) {
    const float* o = f.wrt == 0 ? x2 : x1;
    for (int64_t j = 0; j < n; ++j) out[j] = x0[j] * o[j];
  } else if (f.fn == OpKind::kMaximum || f.fn == OpKind::kMinimum) {
    // ReLU6's clamp: dy times binary_deriv's 1 or 0, in float (the same bits: -0 for a negative
    // dy, NaN for an infinite one).
    const float *dy = x0, *a = x1, *b = x2;
    if (f.fn == OpKind::kMaximum && f.wrt == 0)
      pass_grad(dy, a, b, out, n, [](float p, float q) { return p >= q; });
    else if (f.fn == OpKind::kMaximum)
      pass_grad(dy, a, b, out, n, [](float p, float q) { return !(p >= q); });
    else if (f.wrt == 0)
      pass_grad(dy, a, b, out, n, [](float p, float q) { return p <= q; });
    else
      pass_grad(dy, a, b, out, n, [](float p, float q) { return !(p <= q); });
  } else {
    for (int64_t j = 0; j < n; ++j)
      out[j] = static_cast<float>(x0[j] * binary_deriv(f.fn, x1[j], x2[j], f.wrt));
  }
}

// Where an input of a fused op comes from: an earlier op of the group, or a tile.
struct Source {
  int producer = -1;  // index in the group, or -1
  std::optional<Access> tile;
};

// Runs group `ops` (fusable, same box) row by row. `tile_of(v)` gives the tile of an input value
// not produced in the group; outs[i] (null for a value that stays in the group) receives op i's
// result.
void run_group(const std::vector<const Op*>& ops, const Box& box,
               const std::function<const Tensor*(ValueId)>& tile_of,
               const std::vector<Tensor*>& outs) {
  if (run_channel_affine(ops, box, tile_of, outs)) return;
  const size_t n = ops.size();
  std::vector<FusedOp> fo;
  std::vector<std::vector<Source>> src(n);
  std::vector<std::optional<Access>> dst(n);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = *ops[i];
    FusedOp f;
    f.op = &op;
    f.kind = op.kind;
    if (op.kind == OpKind::kElementwiseGrad) f.fn = *parse_op_kind(attr_s(op, "fn"));
    f.wrt = static_cast<int>(attr_i(op, "wrt", 0));
    f.alpha = attr_f(op, "alpha", 1.0);
    if (op.kind == OpKind::kCausalMask || f.fn == OpKind::kCausalMask) f.mask.emplace(op);
    fo.push_back(std::move(f));
    for (const auto& x : op.inputs) {
      Source s;
      for (size_t q = 0; q < i; ++q)
        if (ops[q]->results[0].value == x.value) s.producer = static_cast<int>(q);
      if (s.producer < 0) s.tile.emplace(*tile_of(x.value), x);
      src[i].push_back(std::move(s));
    }
    if (outs[i]) dst[i].emplace(*outs[i], op.results[0]);
  }
  // Trailing dims every operand walks as one regular stride merge into one long row (a
  // per-channel broadcast over NCHW rows of 4 to 64 elements becomes rows of H*W; a whole
  // contiguous tensor one row), so short rows cost no per-row overhead. Not across a causal
  // mask, which reads the row coordinate.
  const int64_t r = box.rank();
  int64_t k0 = r - 1;
  bool masked = false;
  for (const auto& f : fo) masked = masked || f.mask.has_value();
  auto merges = [&](int64_t d) {
    int64_t ext = box.end()[d + 1] - box.start()[d + 1];
    auto ok = [&](const Access& a) { return a.coef[d] == a.coef[d + 1] * ext; };
    for (size_t i = 0; i < n; ++i) {
      for (const Source& s : src[i])
        if (s.tile && !ok(*s.tile)) return false;
      if (dst[i] && !ok(*dst[i])) return false;
    }
    return true;
  };
  if (!masked)
    while (k0 > 0 && merges(k0 - 1)) --k0;
  Box outer = box;
  int64_t row_len = 1;
  if (r > 0) {
    std::vector<int64_t> e(box.end().values());
    for (int64_t d = k0; d < r; ++d) {
      row_len *= box.end()[d] - box.start()[d];
      e[d] = box.start()[d] + 1;
    }
    outer = Box(box.start(), IVec(e));
  }
  size_t buffers = n;
  for (const auto& x : src) buffers += x.size();
  const int64_t block = std::clamp<int64_t>(kBlockFloats / static_cast<int64_t>(buffers) / 16 * 16,
                                            kMinBlock, kMaxBlock);
  const auto blk = static_cast<size_t>(std::min(block, std::max<int64_t>(row_len, 1)));
  std::vector<std::vector<float>> val(n, std::vector<float>(blk));
  std::vector<std::vector<std::vector<float>>> gather(n);
  for (size_t i = 0; i < n; ++i) gather[i].assign(src[i].size(), std::vector<float>(blk));
  // What a gather buffer holds when it was filled with one value: that value in its first n.
  struct Filled {
    float v = 0.0f;
    int64_t n = 0;
  };
  std::vector<std::vector<Filled>> filled(n);
  for (size_t i = 0; i < n; ++i) filled[i].assign(src[i].size(), Filled{});
  const int64_t last = r - 1;
  std::vector<const float*> in;
  std::vector<const float*> res(n);  // where op i's block of results is
  auto row = [&](const int64_t* p, int64_t len) {
    for (int64_t j0 = 0; j0 < len; j0 += block) {
      int64_t m = std::min(block, len - j0);
      for (size_t i = 0; i < n; ++i) {
        in.clear();
        for (size_t k = 0; k < src[i].size(); ++k) {
          const Source& s = src[i][k];
          if (s.producer >= 0) {
            in.push_back(res[static_cast<size_t>(s.producer)]);
            continue;
          }
          const Access& a = *s.tile;
          int64_t step = last >= 0 ? a.coef[last] : 0;
          int64_t o = a.offset(p) + step * j0;
          if (a.fdata && step == 1) {
            in.push_back(a.fdata + o);
            continue;
          }
          float* g = gather[i][k].data();
          if (a.fdata && step == 0) {
            // A broadcast value (a clamp's bound, a per-channel scale): filled once per value.
            Filled& fl = filled[i][k];
            if (fl.n < m || std::memcmp(&fl.v, a.fdata + o, sizeof(float)) != 0) {
              std::fill(g, g + m, a.fdata[o]);
              fl = {a.fdata[o], m};
            }
          } else {
            filled[i][k].n = 0;
            for (int64_t j = 0; j < m; ++j) g[j] = a.load(o + j * step);
          }
          in.push_back(g);
        }
        float* v = val[i].data();
        float* d = nullptr;
        int64_t step = 0;
        if (dst[i]) {
          const Access& a = *dst[i];
          step = last >= 0 ? a.coef[last] : 0;
          d = outs[i]->f32() + a.offset(p) + step * j0;
          if (step == 1) v = d;  // straight into the tile (it shares no memory with the inputs)
        }
        eval(fo[i], in, v, m, p, j0);
        res[i] = v;
        if (d && v != d)
          for (int64_t j = 0; j < m; ++j) d[j * step] = v[j];
      }
    }
  };
  if (r == 0)
    for_each_row(box, row);
  else
    for_each_point(outer, [&](const int64_t* p) { row(p, row_len); });
}

// run_group on the device's threads: slices of the box (split_box), each run as a whole group,
// so every element goes through the same arithmetic as on one thread.
Status run_group_split(const std::vector<const Op*>& ops, const Box& box,
                       const std::function<const Tensor*(ValueId)>& tile_of,
                       const std::vector<Tensor*>& outs, const KernelOptions& options) {
  std::vector<Box> pieces = split_box(ops, box, options);
  if (pieces.empty()) {
    run_group(ops, box, tile_of, outs);
    return {};
  }
  return run_pieces(pieces, options, [&](const Box& b) {
    run_group(ops, b, tile_of, outs);
    return Status();
  });
}

}  // namespace

bool chain_fusable(const Op& op, const KernelOptions& options) {
  if (options.reference || !is_elementwise(op.kind) || op.kind == OpKind::kFill ||
      op.results.size() != 1 || op.space.has_reduce() || !unit_windows(op))
    return false;
  for (const auto& x : op.inputs)
    if (x.padded) return false;
  if (op.kind == OpKind::kElementwiseGrad) {
    auto f = parse_op_kind(attr_s(op, "fn"));
    if (!f || !(supported_fn(*f) || *f == OpKind::kCausalMask)) return false;
    if (*f != OpKind::kWhere && op_kind_info(*f).category == OpCategory::kBinary &&
        op.inputs.size() < 3)
      return false;
  }
  return true;
}

bool writes_in_place(const Op& op, size_t input) {
  if (input >= op.inputs.size() || !chain_fusable(op)) return false;
  // The kinds whose loops (unary, binary, eval) compute out[j] from the inputs' j-th elements
  // alone; not the copies of a causal mask or of add's gradient, nor where's three operands.
  const OpKind k = op.kind == OpKind::kElementwiseGrad ? *parse_op_kind(attr_s(op, "fn")) : op.kind;
  const OpCategory cat = op_kind_info(k).category;
  if (k == OpKind::kCausalMask) return false;
  if (op.kind == OpKind::kElementwiseGrad ? cat != OpCategory::kUnary
                                          : cat != OpCategory::kUnary && cat != OpCategory::kBinary)
    return false;
  if (!kdetail::same_coordinates(op.results[0].proj)) return false;
  for (const auto& x : op.inputs)
    if (x.value == op.inputs[input].value && !kdetail::same_coordinates(x.proj)) return false;
  return true;
}

namespace {

// The end of the fused group that starts at call i of n (i + 1 when call i runs alone): the
// following fusable calls over the same box whose reads of earlier group results use the
// producer's projection (so a value flows point to point).
template <class OpAt, class BoxAt>
size_t group_end(size_t i, size_t n, OpAt&& op_at, BoxAt&& box_at, const KernelOptions& options) {
  size_t j = i + 1;
  if (!chain_fusable(op_at(i), options)) return j;
  for (; j < n; ++j) {
    const Op& next = op_at(j);
    if (!chain_fusable(next, options) || box_at(j) != box_at(i)) break;
    bool ok = true;
    for (const auto& x : next.inputs)
      for (size_t q = i; q < j; ++q) {
        const auto& r = op_at(q).results[0];
        if (r.value == x.value && !(r.proj == x.proj)) ok = false;
      }
    if (!ok) break;
  }
  return j;
}

// True when value v of a group ending before call j is read by a later call.
template <class OpAt>
bool read_after(ValueId v, size_t j, size_t n, OpAt&& op_at) {
  for (size_t r = j; r < n; ++r)
    for (const auto& x : op_at(r).inputs)
      if (x.value == v) return true;
  return false;
}

bool contains(const std::vector<ValueId>& vs, ValueId v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

}  // namespace

Result<ChainResults> run_chain(const Graph& g, const std::vector<ChainCall>& calls,
                               const std::vector<ValueId>& temporaries,
                               const std::function<const Tensor*(ValueId)>& input,
                               const KernelOptions& options) {
  std::map<ValueId, Tensor> made;  // values computed so far (temporaries of unfused calls too)
  auto tile_of = [&](ValueId v) -> const Tensor* {
    auto it = made.find(v);
    return it != made.end() ? &it->second : input(v);
  };
  auto new_tile = [&](const Op& op, size_t k, const Box& box) {
    const auto& r = op.results[k];
    return made.emplace(r.value, Tensor::tile(g.type(r.value).dtype(), r.proj.image(box))).first;
  };
  auto op_at = [&](size_t q) -> const Op& { return g.op(calls[q].op); };
  auto box_at = [&](size_t q) -> const Box& { return calls[q].box; };
  for (size_t i = 0; i < calls.size();) {
    const Op& op = g.op(calls[i].op);
    const Box& box = calls[i].box;
    size_t j = group_end(i, calls.size(), op_at, box_at, options);
    if (j == i + 1) {  // a single call: the ordinary kernel
      std::vector<const Tensor*> ins;
      for (const auto& x : op.inputs) ins.push_back(tile_of(x.value));
      std::vector<Tensor*> outs;
      for (size_t k = 0; k < op.results.size(); ++k) outs.push_back(&new_tile(op, k, box)->second);
      HEDDLE_TRY(run(op, box, ins, outs, options));
      ++i;
      continue;
    }
    // A value of the group gets a tile unless it is a temporary read only inside the group.
    std::vector<const Op*> ops;
    std::vector<Tensor*> outs;
    for (size_t q = i; q < j; ++q) {
      const Op& o = g.op(calls[q].op);
      ops.push_back(&o);
      ValueId v = o.results[0].value;
      bool skip = contains(temporaries, v) && !read_after(v, j, calls.size(), op_at);
      outs.push_back(skip ? nullptr : &new_tile(o, 0, box)->second);
    }
    HEDDLE_TRY(run_group_split(ops, box, tile_of, outs, options));
    i = j;
  }
  ChainResults out;
  for (auto& [v, t] : made)
    if (!contains(temporaries, v)) out.emplace_back(v, std::move(t));
  return out;
}

Status run_chain_into(const std::vector<BoundCall>& calls, const std::vector<ValueId>& temporaries,
                      const KernelOptions& options) {
  auto op_at = [&](size_t q) -> const Op& { return *calls[q].op; };
  auto box_at = [&](size_t q) -> const Box& { return calls[q].box; };
  KernelOptions one = options;
  for (size_t i = 0; i < calls.size();) {
    one.unchanged_inputs = calls[i].unchanged_inputs;
    Status st;
    if (size_t e = i; kdetail::run_norm_grads(calls, i, one, &e, &st) ||
                      kdetail::run_masked_softmax(calls, i, temporaries, one, &e, &st) ||
                      kdetail::run_scores_grad(calls, i, temporaries, one, &e, &st) ||
                      kdetail::run_conv_epilogue(calls, i, temporaries, one, &e, &st) ||
                      kdetail::run_product_bias(calls, i, temporaries, one, &e, &st)) {
      HEDDLE_TRY(st);
      i = e;
      continue;
    }
    size_t j = group_end(i, calls.size(), op_at, box_at, options);
    if (j == i + 1) {
      HEDDLE_TRY(run(*calls[i].op, calls[i].box, calls[i].ins, calls[i].outs, one));
      ++i;
      continue;
    }
    std::vector<const Op*> ops;
    std::vector<Tensor*> outs;
    for (size_t q = i; q < j; ++q) {
      ops.push_back(calls[q].op);
      ValueId v = calls[q].op->results[0].value;
      bool skip = contains(temporaries, v) && !read_after(v, j, calls.size(), op_at);
      outs.push_back(skip ? nullptr : calls[q].outs[0]);
    }
    // Inputs not produced in the group come from the calls' own operand tiles.
    auto tile_of = [&](ValueId v) -> const Tensor* {
      for (size_t q = i; q < j; ++q)
        for (size_t k = 0; k < calls[q].op->inputs.size(); ++k)
          if (calls[q].op->inputs[k].value == v) return calls[q].ins[k];
      HEDDLE_UNREACHABLE();
      return nullptr;
    };
    HEDDLE_TRY(run_group_split(ops, calls[i].box, tile_of, outs, options));
    i = j;
  }
  return {};
}

}  // namespace heddle::kernels

namespace heddle::kdetail {

bool same_coordinates(const IndexProjection& p) {
  return p.map() == AffineMap::identity(p.index_rank()) && p.tensor_rank() == p.index_rank() &&
         std::all_of(p.window().begin(), p.window().end(), [](int64_t w) { return w == 1; });
}

bool is_temporary(const std::vector<ValueId>& temporaries, ValueId v) {
  return std::find(temporaries.begin(), temporaries.end(), v) != temporaries.end();
}

bool read_from(const std::vector<kernels::BoundCall>& calls, ValueId v, size_t from) {
  for (size_t q = from; q < calls.size(); ++q)
    for (const auto& x : calls[q].op->inputs)
      if (x.value == v) return true;
  return false;
}

void run_elementwise(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                     const std::vector<Tensor*>& outs) {
  auto tile_of = [&](ValueId v) -> const Tensor* {
    for (size_t k = 0; k < op.inputs.size(); ++k)
      if (op.inputs[k].value == v) return ins[k];
    HEDDLE_UNREACHABLE();
    return nullptr;
  };
  kernels::run_group({&op}, box, tile_of, outs);
}

}  // namespace heddle::kdetail
