// Attention's score rows as one pass per row (src/ops/KernelScoresGrad.cpp): scale ->
// causal_mask -> softmax as lowering fuses it, and the chain autodiff makes of it (softmax's
// gradient from its output, the mask's, the scale's), run through run_chain_into on random row
// boxes and tiles, against the calls run one by one through the reference loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

using testing::all_nan;
using testing::nan_tile;

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool grad_of(const Op& op, OpKind fn) {
  auto it = op.attrs.find("fn");
  return op.kind == OpKind::kElementwiseGrad && it != op.attrs.end() &&
         std::get<std::string>(it->second) == op_kind_name(fn);
}

// The op of `g` that reads `v` as its input 0 and matches `pred`.
template <class P>
const Op* reader(const Graph& g, ValueId v, P pred) {
  for (const Op& op : g.ops())
    if (!op.inputs.empty() && op.inputs[0].value == v && pred(op)) return &op;
  return nullptr;
}

// A random box of `whole` (whole itself a third of the time).
Box sub_box(const Box& whole, std::mt19937& rng) {
  if (uniform(rng, 0, 2) == 0) return whole;
  std::vector<int64_t> s, e;
  for (int64_t d = 0; d < whole.rank(); ++d) {
    int64_t a = uniform(rng, whole.start()[d], whole.end()[d] - 1);
    int64_t b = uniform(rng, whole.start()[d], whole.end()[d] - 1);
    s.push_back(std::min(a, b));
    e.push_back(std::max(a, b) + 1);
  }
  return Box(IVec(s), IVec(e));
}

// A tile of `full` over a random region that contains `inner`, along the leading dims only (the
// last dim stays whole, so rows are contiguous).
Tensor cover(const Tensor& full, const Box& inner, std::mt19937& rng) {
  if (uniform(rng, 0, 1) == 0) return full.crop(inner);
  std::vector<int64_t> s(inner.start().values()), e(inner.end().values());
  for (int64_t d = 0; d + 1 < inner.rank(); ++d) {
    s[d] = uniform(rng, full.region().start()[d], s[d]);
    e[d] = uniform(rng, e[d], full.region().end()[d]);
  }
  return full.crop(Box(IVec(s), IVec(e)));
}

double max_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(double(a.f32()[i]) - b.f32()[i]) / (1 + std::fabs(b.f32()[i])));
  return m;
}

TEST(FusedChains, TheScoresGradientThroughACausalMaskAndAScaleIsOnePassAndMatchesTheReference) {
  std::mt19937 rng(61);
  int64_t fused = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Graph g;
    Ops ops(g);
    const int64_t q = uniform(rng, 1, 40), k = q + uniform(rng, 0, 5);
    const double alpha = trial % 4 == 0 ? 1.0 : 0.05 + 0.1 * static_cast<double>(trial % 7);
    ValueId x = ops.param("x", f32({uniform(rng, 1, 2), uniform(rng, 1, 3), q, k}));
    ValueId w = ops.param("w", g.type(x));
    ValueId p = ops.softmax(ops.causal_mask(ops.scale(x, alpha)), -1);
    ValueId loss = ops.reduce(OpKind::kReduceSum, ops.mul(p, w), {0, 1, 2, 3});
    ops.output(loss);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    auto grads = build_gradients(g, loss);
    ASSERT_TRUE(grads.ok()) << grads.error().to_string();
    const Graph& G = grads->graph;
    const Op* ng = nullptr;
    for (const Op& op : G.ops())
      if (op.kind == OpKind::kNormGrad) ng = &op;
    ASSERT_NE(ng, nullptr);
    const Op* mk = reader(G, ng->results[0].value,
                          [](const Op& o) { return grad_of(o, OpKind::kCausalMask); });
    ASSERT_NE(mk, nullptr);
    const Op* sc =
        reader(G, mk->results[0].value, [](const Op& o) { return grad_of(o, OpKind::kScale); });
    ASSERT_NE(sc, nullptr);
    const bool scaled = trial % 3 != 0;  // else the chain ends at the mask's gradient
    SCOPED_TRACE("q " + std::to_string(q) + " k " + std::to_string(k) + " alpha " +
                 std::to_string(alpha) + (scaled ? " scaled" : ""));

    const Box rows = sub_box(ng->space.box(), rng);
    const Box img = ng->results[0].proj.image(rows);
    const TensorType t = G.type(x);
    Tensor dy_full = testing::random_tensor(t, rng, -1.0, 1.0);
    Tensor y_full = testing::random_tensor(t, rng, 0.0, 1.0);
    Tensor s_full = testing::random_tensor(t, rng, -1.0, 1.0);
    Tensor dy = cover(dy_full, img, rng), y = cover(y_full, img, rng), s = cover(s_full, img, rng);
    // The values between the calls, NaN: the one pass never writes them.
    Tensor r = nan_tile(img), m = nan_tile(img);
    Tensor out_full = testing::random_tensor(t, rng, -1.0, 1.0);
    Tensor out = cover(out_full, img, rng);
    Tensor* last = scaled ? &out : &m;
    std::vector<kernels::BoundCall> calls = {{ng, rows, {&dy, &y}, {&r}},
                                             {mk, img, {&r, &s}, {scaled ? &m : last}}};
    if (scaled) calls.push_back({sc, img, {&m, &s}, {&out}});
    std::vector<ValueId> temps = {ng->results[0].value};
    if (scaled) temps.push_back(mk->results[0].value);
    ASSERT_TRUE(kernels::run_chain_into(calls, temps).ok());

    // The reference: the three calls one by one.
    kernels::KernelOptions ref;
    ref.reference = true;
    Tensor rr = Tensor::tile(DType::kF32, img), mr = Tensor::tile(DType::kF32, img),
           outr = Tensor::tile(DType::kF32, img);
    ASSERT_TRUE(kernels::run(*ng, rows, {&dy, &y}, {&rr}, ref).ok());
    ASSERT_TRUE(kernels::run(*mk, img, {&rr, &s}, {&mr}, ref).ok());
    ASSERT_TRUE(kernels::run(*sc, img, {&mr, &s}, {&outr}, ref).ok());
    const Tensor& want = scaled ? outr : mr;
    Tensor got = last->crop(img);
    EXPECT_LT(max_diff(got, want), 2e-5);
    const bool untouched = all_nan(r) && (!scaled || all_nan(m));
    EXPECT_TRUE(untouched) << "the values between the calls were written";
    fused += untouched;
  }
  EXPECT_EQ(fused, 80);
}

// The forward: the scores (a tile of random values, rows contiguous) scaled (or not), masked and
// softmaxed in one pass on 1-3 threads, never writing the scaled or masked scores; every row
// against the three reference calls, exactly 0 where the mask hides an element of a row that
// shows any, and NaN, as the calls give, in a row that shows none (fewer keys than queries).
TEST(FusedChains, ScaleMaskAndSoftmaxAreOnePassAndMatchTheReference) {
  std::mt19937 rng(67);
  int64_t fused = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Graph g;
    Ops ops(g);
    // Fewer keys than queries too: the first rows then show nothing (NaN, as unfused).
    const int64_t q = uniform(rng, 1, 40), k = std::max<int64_t>(1, q + uniform(rng, -5, 5));
    // Scales a float holds exactly (1/sqrt(d) for d a power of four: the rows scale in float
    // vectors) and ones it does not (through doubles, as the scale kernel computes).
    const double alpha =
        trial % 2 ? 0.05 + 0.1 * static_cast<double>(trial % 7) : std::ldexp(1.0, -(trial / 2 % 5));
    const bool scaled = trial % 3 != 0;  // else the chain starts at the mask
    ValueId x = ops.param("x", f32({uniform(rng, 1, 2), uniform(rng, 1, 3), q, k}));
    ValueId s = scaled ? ops.scale(x, alpha) : x;
    ValueId mm = ops.causal_mask(s);
    ValueId p = ops.softmax(mm, -1);
    ops.output(p);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    const Op* sc = scaled ? &g.op(g.value(s).producer) : nullptr;
    const Op& mk = g.op(g.value(mm).producer);
    const Op& sm = g.op(g.value(p).producer);
    kernels::KernelOptions o;
    o.threads = static_cast<int>(uniform(rng, 1, 3));
    o.grain = 1;
    SCOPED_TRACE("q " + std::to_string(q) + " k " + std::to_string(k) + " alpha " +
                 std::to_string(alpha) + (scaled ? " scaled" : "") + " threads " +
                 std::to_string(o.threads));

    const Box rows = sub_box(sm.space.box(), rng);
    const Box img = sm.inputs[0].proj.image(rows);
    const TensorType t = g.type(x);
    Tensor x_full = testing::random_tensor(t, rng, -8.0, 8.0);
    Tensor xt = cover(x_full, img, rng);
    Tensor r = nan_tile(img), m = nan_tile(img);
    Tensor out_full = testing::random_tensor(t, rng, -1.0, 1.0);
    Tensor out = cover(out_full, img, rng);
    std::vector<kernels::BoundCall> calls;
    std::vector<ValueId> temps = {mm};
    if (scaled) {
      calls.push_back({sc, img, {&xt}, {&r}});
      temps.push_back(s);
    }
    calls.push_back({&mk, img, {scaled ? &r : &xt}, {&m}});
    calls.push_back({&sm, rows, {&m}, {&out}});
    ASSERT_TRUE(kernels::run_chain_into(calls, temps, o).ok());

    // The three calls one by one (the reference loops, or the fast kernels): the scaled and the
    // masked scores, and the probabilities.
    struct OneByOne {
      Tensor scaled, masked, probs;
    };
    auto one_by_one = [&](bool reference) {
      kernels::KernelOptions k;
      k.reference = reference;
      OneByOne c{Tensor::tile(DType::kF32, img), Tensor::tile(DType::kF32, img),
                 Tensor::tile(DType::kF32, img)};
      if (scaled) {
        EXPECT_TRUE(kernels::run(*sc, img, {&xt}, {&c.scaled}, k).ok());
      }
      EXPECT_TRUE(kernels::run(mk, img, {scaled ? &c.scaled : &xt}, {&c.masked}, k).ok());
      EXPECT_TRUE(kernels::run(sm, rows, {&c.masked}, {&c.probs}, k).ok());
      return c;
    };
    const OneByOne refc = one_by_one(true);
    const Tensor& want = refc.probs;
    const Tensor& mr = refc.masked;
    Tensor got = out.crop(img);
    EXPECT_LT(max_diff(got, want), 2e-5);
    // The fast kernels one by one give the same bits: a row's visible prefix, run in whole
    // vectors with -inf past it, sums and scales exactly as the whole masked row.
    const Tensor fast = one_by_one(false).probs;
    int64_t bits_differ = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      bits_differ += std::memcmp(&got.f32()[i], &fast.f32()[i], sizeof(float)) != 0 &&
                     !(std::isnan(got.f32()[i]) && std::isnan(fast.f32()[i]));
    EXPECT_EQ(bits_differ, 0) << "the one pass differs from the fast calls one by one";
    int64_t hidden_nonzero = 0, nan_differs = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const bool row_shows_none = std::isnan(want.f32()[i]);
      nan_differs += row_shows_none != std::isnan(got.f32()[i]);
      hidden_nonzero += !row_shows_none && std::isinf(mr.f32()[i]) && got.f32()[i] != 0.0f;
    }
    EXPECT_EQ(hidden_nonzero, 0) << "a hidden element got a weight";
    EXPECT_EQ(nan_differs, 0) << "a row that shows nothing differs from the calls one by one";
    const bool untouched = all_nan(m) && (!scaled || all_nan(r));
    EXPECT_TRUE(untouched) << "the scaled or masked scores were written";
    fused += untouched;
  }
  EXPECT_EQ(fused, 80);
}

}  // namespace
}  // namespace heddle
