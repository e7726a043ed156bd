// The fast kernels and the fused chains against the generic reference loops
// (KernelOptions::reference): every op of the zoo transformers' training steps (forward, backward,
// AdamW) on random sub-boxes, with input and output tiles cut from larger random regions (so
// strides, origins and broadcasts vary), overwriting and accumulating; and elementwise chains,
// hand-made and taken from those graphs, through kernels::run_chain.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/CausalOperand.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle {
namespace {

using namespace testing;  // uniform, tile_diff, random_sub_box, random_cover, einsum_of

// The training step (forward, backward, AdamW) of zoo model `name` at a small size.
Graph train_graph(const char* name) { return testing::small_train_graph(name, 6, 16, 2, 11); }

// Runs op `op` of `g` over a random sub-box on tiles cut from `full` (one random tensor per
// value) with and without the reference loops; expects the same outputs. Returns false when
// the op is skipped.
bool check_op(const Graph& g, const Op& op, std::map<ValueId, Tensor>& full, std::mt19937& rng,
              bool whole_box = false) {
  if (op.kind == OpKind::kTopkGating || op.kind == OpKind::kFill) return false;
  auto value = [&](ValueId v) -> Tensor& {
    auto it = full.find(v);
    if (it == full.end())
      it = full.emplace(v, testing::random_tensor(g.type(v), rng, -1.0, 1.0, 2)).first;
    return it->second;
  };
  Box box = whole_box ? op.space.box() : random_sub_box(op.space.box(), rng);
  std::vector<Tensor> ins;
  for (const auto& x : op.inputs) {
    Tensor& t = value(x.value);
    Box img = x.proj.image(box);
    if (x.padded) img = img.intersect(t.region());
    ins.push_back(t.crop(random_cover(img, t.region(), rng)));
  }
  std::vector<const Tensor*> in_ptrs;
  for (auto& t : ins) in_ptrs.push_back(&t);
  kernels::KernelOptions fast, ref;
  ref.reference = true;
  fast.accumulate = ref.accumulate = uniform(rng, 0, 1) == 1;
  fast.optimizer_step = ref.optimizer_step = uniform(rng, 1, 5);
  // 1 to 3 threads; at grain 1 the own loops and sgemms split even these small calls.
  fast.threads = static_cast<int>(uniform(rng, 1, 3));
  if (uniform(rng, 0, 1) == 1) fast.grain = 1;
  std::vector<Tensor> out_fast, out_ref;
  for (const auto& r : op.results) {
    Tensor& t = value(r.value);
    Tensor o = t.crop(random_cover(r.proj.image(box), t.region(), rng));
    out_fast.push_back(o);
    out_ref.push_back(o);
  }
  std::vector<Tensor*> pf, pr;
  for (size_t i = 0; i < out_fast.size(); ++i) {
    pf.push_back(&out_fast[i]);
    pr.push_back(&out_ref[i]);
  }
  SCOPED_TRACE(std::string(op_kind_name(op.kind)) + " box " + box.to_string() +
               (fast.accumulate ? " accumulate" : "") + " threads " + std::to_string(fast.threads) +
               " grain " + std::to_string(fast.grain));
  Status sf = kernels::run(op, box, in_ptrs, pf, fast);
  Status sr = kernels::run(op, box, in_ptrs, pr, ref);
  EXPECT_EQ(sf.ok(), sr.ok());
  for (size_t i = 0; i < out_fast.size(); ++i)
    EXPECT_LT(tile_diff(out_fast[i], out_ref[i]), 2e-4) << "result " << i;
  return true;
}

// check_op on every op of `g`, over its whole space half of the time (whole tiles then give the
// kernels their plain layouts). Returns how many ops were checked.
int64_t check_ops(const Graph& g, std::mt19937& rng) {
  std::map<ValueId, Tensor> full;
  int64_t n = 0;
  for (const Op& op : g.ops()) n += check_op(g, op, full, rng, uniform(rng, 0, 1) == 1);
  return n;
}

TEST(FastKernels, EveryTrainingOpOfTheTransformersMatchesTheReference) {
  std::mt19937 rng(99);
  int64_t checked = 0;
  for (const char* name : {"gpt-tiny", "llama-tiny", "moe-tiny"}) {
    SCOPED_TRACE(name);
    Graph g = train_graph(name);
    std::map<ValueId, Tensor> full;
    for (int round = 0; round < 6; ++round)
      for (const Op& op : g.ops()) checked += check_op(g, op, full, rng);
  }
  EXPECT_GT(checked, 3000);
}

// The convolution network's training step (resnet-tiny: convolutions, per-channel affines,
// residual adds, pooling, their gradients, AdamW on conv weights): per-channel gradients summed
// over N, H, W walk merged rows of H * W in the fast loops.
TEST(FastKernels, EveryTrainingOpOfAConvNetMatchesTheReference) {
  std::mt19937 rng(31);
  zoo::ZooOverrides ov;
  ov.hidden = 8;
  ov.batch = 2;
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model("resnet-tiny", ov, mo);
  ASSERT_TRUE(fwd.ok()) << fwd.error().to_string();
  auto step = build_train_step(*fwd, {});
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  int64_t checked = 0, grads = 0;
  for (int round = 0; round < 2; ++round) {
    std::map<ValueId, Tensor> full;
    for (const Op& op : step->graph.ops()) {
      checked += check_op(step->graph, op, full, rng, uniform(rng, 0, 1) == 1);
      // (an add's gradient is a sum of dy over its broadcast dims: reduce_sum)
      grads += op.kind == OpKind::kElementwiseGrad || op.kind == OpKind::kReduceSum;
    }
  }
  EXPECT_GT(checked, 400);
  EXPECT_GT(grads, 100);
}

// The standalone transformer kernels with axes, shapes and broadcasts the zoo does not use.
TEST(FastKernels, RowAndPointwiseKernelsOnRandomShapesMatchTheReference) {
  std::mt19937 rng(5);
  int64_t checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g;
    Ops ops(g);
    int64_t a = uniform(rng, 1, 3), b = uniform(rng, 1, 7), c = 2 * uniform(rng, 1, 9);
    ValueId x = ops.param("x", f32({a, b, c}));
    ValueId x4 = ops.param("x4", f32({a, b, 2, c}));
    ValueId gm = ops.param("g", f32({c})), bt = ops.param("b", f32({c}));
    ValueId row = ops.param("row", f32({1, b, 1}));
    ValueId lab = ops.input("labels", i64({a, b}));
    std::vector<ValueId> ys = {ops.softmax(x, -1),
                               ops.softmax(x, 1),
                               ops.log_softmax(x, -1),
                               ops.layernorm(x, gm, bt, 1e-5),
                               ops.rmsnorm(x, gm, 1e-5),
                               ops.cross_entropy(x, lab),
                               ops.causal_mask(x),
                               ops.rotary(x4, 100.0),
                               ops.gelu(x),
                               ops.gelu_tanh(x),
                               ops.silu(x),
                               ops.add(x, row),
                               ops.mul(x, gm),
                               ops.binary(OpKind::kSub, row, x),
                               ops.scale(x, 0.3)};
    ValueId loss = ops.reduce(OpKind::kReduceSum, ops.add(ys[0], ys[1]), {0, 1, 2});
    (void)loss;
    for (ValueId y : ys) ops.output(y);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    std::map<ValueId, Tensor> full;
    for (const Op& op : g.ops()) checked += check_op(g, op, full, rng);
  }
  EXPECT_GT(checked, 4000);
}

// Reductions (sum, mean, max, min) over random sets of axes of 2-4 dim tensors, kept or dropped,
// on random sub-boxes, tiles, accumulation and threads, match the reference: among them the
// leading axes alone, whose loop runs along the input's contiguous last dim (unit_stride_last).
TEST(FastKernels, ReductionsOverAnyAxesMatchTheReference) {
  std::mt19937 rng(61);
  int64_t checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    Graph g;
    Ops ops(g);
    const int64_t rank = uniform(rng, 2, 4);
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d)
      shape.push_back(uniform(rng, d == 0 ? 2 : 3, d + 1 == rank ? 70 : 12));
    ValueId x = ops.param("x", f32(shape));
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (uniform(rng, 0, 1) == 1) axes.push_back(d);
    if (axes.empty()) axes.push_back(0);
    if (trial % 3 == 0) axes.assign({0});  // the leading axis alone
    const bool keep = uniform(rng, 0, 1) == 1;
    for (OpKind k :
         {OpKind::kReduceSum, OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceMin})
      ops.output(ops.reduce(k, x, axes, keep));
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    std::map<ValueId, Tensor> full;
    for (const Op& op : g.ops()) checked += check_op(g, op, full, rng, trial % 4 == 0);
  }
  EXPECT_GT(checked, 400);
}

// The vector loops of the activations, softmax and the norms (src/ops/Simd.h) on rows of every
// length up to 200 (so every size of a zero-padded tail), with values far into the clamped ranges
// of fast_exp and fast_erf: the forward ops and every gradient op autodiff makes of them.
TEST(FastKernels, VectorLoopsOnLongRowsAndWideValuesMatchTheReference) {
  std::mt19937 rng(41);
  int64_t checked = 0;
  for (int trial = 0; trial < 160; ++trial) {
    Graph g;
    Ops ops(g);
    int64_t a = uniform(rng, 1, 3), n = trial < 40 ? trial + 1 : uniform(rng, 1, 200);
    ValueId x = ops.param("x", f32({a, n}));
    ValueId gm = ops.param("g", f32({n})), bt = ops.param("b", f32({n}));
    ValueId lab = ops.input("labels", i64({a}));
    std::vector<ValueId> ys = {ops.gelu(x),
                               ops.gelu_tanh(x),
                               ops.silu(x),
                               ops.unary(OpKind::kSigmoid, x),
                               ops.softmax(x, -1),
                               ops.log_softmax(x, -1),
                               ops.layernorm(x, gm, bt, 1e-5),
                               ops.rmsnorm(x, gm, 1e-6)};
    ValueId loss = ops.reduce(OpKind::kReduceSum, ops.cross_entropy(x, lab), {0});
    for (ValueId y : ys)
      loss = ops.add(loss, ops.reduce(OpKind::kReduceSum, ops.mul(y, y), {0, 1}));
    ops.output(loss);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    auto grads = build_gradients(g, loss);
    ASSERT_TRUE(grads.ok()) << grads.error().to_string();
    const Graph& G = grads->graph;
    double range = std::array<double, 3>{1.0, 6.0, 40.0}[trial % 3];
    std::map<ValueId, Tensor> full;
    full.emplace(x, testing::random_tensor(G.type(x), rng, -range, range));
    full.emplace(lab, testing::random_tensor(G.type(lab), rng, 0, 0, n));
    for (const Op& op : G.ops()) checked += check_op(G, op, full, rng, uniform(rng, 0, 1) == 1);
  }
  EXPECT_GT(checked, 6000);
}

// AdamW on a tensor far larger than the caches writes its results with streaming stores
// (src/ops/Simd.cpp) from the first 32-byte aligned element on: bit for bit what the plain loop
// computes on the same elements in short pieces, for every misalignment of the outputs, and
// within the reference's tolerance of its double-precision formula.
TEST(FastKernels, AdamWOnTensorsBeyondTheCachesEqualsItsShortPieces) {
  std::mt19937 rng(23);
  const int64_t n = (int64_t{1} << 20) + 37;
  Graph g;
  Ops ops(g);
  TensorType t = f32({n});
  std::vector<ValueId> r = ops.adamw(ops.input("p", t), ops.input("g", t), ops.input("m", t),
                                     ops.input("v", t), AdamWOptions{}, 3);
  ASSERT_TRUE(ops.ok());
  const Op& op = g.op(0);
  std::vector<Tensor> in = {testing::random_tensor(t, rng), testing::random_tensor(t, rng),
                            testing::random_tensor(t, rng, -0.1, 0.1),
                            testing::random_tensor(t, rng, 0.0, 0.01)};
  std::vector<const Tensor*> ins = {&in[0], &in[1], &in[2], &in[3]};
  kernels::KernelOptions ko;
  ko.optimizer_step = 3;
  std::vector<Tensor> pieces = {Tensor(t), Tensor(t), Tensor(t)};
  std::vector<Tensor*> po = {&pieces[0], &pieces[1], &pieces[2]};
  for (int64_t a = 0; a < n; a += 4093)
    ASSERT_TRUE(kernels::run(op, Box(IVec{a}, IVec{std::min(n, a + 4093)}), ins, po, ko).ok());
  // Outputs viewing 64-byte aligned memory shifted by `shift` elements (equally for all three).
  std::vector<float> mem(static_cast<size_t>(3 * (n + 64)));
  for (int64_t shift : {0, 3, 7}) {
    std::vector<Tensor> outs;
    std::vector<Tensor*> pw;
    for (int64_t k = 0; k < 3; ++k) {
      auto base = reinterpret_cast<uintptr_t>(mem.data() + k * (n + 64));
      auto* at = reinterpret_cast<float*>((base + 63) / 64 * 64) + shift;
      outs.push_back(Tensor::view(DType::kF32, Box(IVec{0}, IVec{n}), at));
    }
    for (auto& o : outs) pw.push_back(&o);
    ASSERT_TRUE(kernels::run(op, op.space.box(), ins, pw, ko).ok());
    for (int64_t k = 0; k < 3; ++k)
      ASSERT_EQ(std::memcmp(outs[k].f32(), pieces[k].f32(), static_cast<size_t>(n) * 4), 0)
          << "result " << k << " shift " << shift;
  }
  for (int64_t i = 0; i < n; i += 997) {
    double P = in[0].f32()[i], G = in[1].f32()[i], M = in[2].f32()[i], V = in[3].f32()[i];
    double m1 = 0.9 * M + 0.1 * G, v1 = 0.999 * V + 0.001 * G * G;
    double mh = m1 / (1 - std::pow(0.9, 3)), vh = v1 / (1 - std::pow(0.999, 3));
    EXPECT_NEAR(pieces[0].f32()[i], P - 0.001 * (mh / (std::sqrt(vh) + 1e-8) + 0.01 * P), 1e-5);
  }
}

// Runs `calls` one by one with the reference loops on materialized values (the meaning of a
// chain), then with run_chain; the chain's surviving values must match.
void check_chain(const Graph& g, const std::vector<kernels::ChainCall>& calls,
                 const std::vector<ValueId>& temps, std::mt19937& rng) {
  std::map<ValueId, Tensor> ext, ref;
  auto get = [&](ValueId v) -> const Tensor* {
    if (auto it = ref.find(v); it != ref.end()) return &it->second;
    auto it = ext.find(v);
    if (it == ext.end())
      it = ext.emplace(v, testing::random_tensor(g.type(v), rng, -1.0, 1.0, 2)).first;
    return &it->second;
  };
  kernels::KernelOptions ro;
  ro.reference = true;
  for (const auto& c : calls) {
    const Op& op = g.op(c.op);
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(get(x.value));
    std::vector<Tensor*> outs;
    for (const auto& r : op.results)
      outs.push_back(
          &ref.insert_or_assign(r.value, Tensor::tile(g.type(r.value).dtype(), r.proj.image(c.box)))
               .first->second);
    ASSERT_TRUE(kernels::run(op, c.box, ins, outs, ro).ok());
  }
  auto got = kernels::run_chain(g, calls, temps, [&](ValueId v) { return &ext.at(v); });
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  size_t survivors = 0;
  for (const auto& [v, t] : ref)
    survivors += std::find(temps.begin(), temps.end(), v) == temps.end();
  EXPECT_EQ(got->size(), survivors);
  for (const auto& [v, t] : *got) {
    SCOPED_TRACE("value " + g.value(v).name);
    EXPECT_TRUE(std::find(temps.begin(), temps.end(), v) == temps.end());
    ASSERT_EQ(t.region(), ref.at(v).region());
    EXPECT_LT(tile_diff(t, ref.at(v)), 2e-4);
  }
}

// Contractions whose operands and result are stored either way round (a result with M along
// its rows' elements is written as C^T = B^T A^T), with batch dims, and with the dims of a group
// interleaved with another's (grouped-query attention: n kv heads of g query heads each, forward
// and backward), which the kernel loops over instead of packing; on random boxes and tiles.
TEST(FastKernels, ContractionsInEveryLayoutMatchTheReference) {
  std::mt19937 rng(23);
  const std::vector<std::string> specs = {
      "mk,kn->mn",         "km,kn->mn",         "mk,nk->mn",        "km,nk->mn",
      "mk,kn->nm",         "km,kn->nm",         "mk,nk->nm",        "km,nk->nm",
      "bmk,bkn->bnm",      "bkm,kn->bnm",       "mck,kn->nmc",      "bqngd,bknd->bngqk",
      "bngqk,bknd->bqngd", "adbcf,abcde->aebf", "acdbf,abcde->afce"};
  int64_t checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g;
    Ops ops(g);
    std::string spec = specs[trial % specs.size()];
    std::map<char, int64_t> ext;
    for (char ch : spec)
      if (std::isalpha(static_cast<unsigned char>(ch)) && !ext.count(ch))
        ext[ch] = std::string("mnkqd").find(ch) != std::string::npos ? uniform(rng, 1, 9)
                                                                     : uniform(rng, 1, 3);
    einsum_of(ops, spec, ext);
    ASSERT_TRUE(ops.ok()) << spec << ": " << ops.status().error().message;
    SCOPED_TRACE(spec);
    checked += check_ops(g, rng);
  }
  EXPECT_EQ(checked, 300);
}

// Runs product `op` (an einsum of params 0 and 1, their tensors in `full`) over its whole box on
// one thread and on two (rows or columns split at grain 1): on AVX2-only hosts, where the
// one-thread sgemms sum every element in an order that does not depend on the split, the results
// have the same bits.
void expect_same_bits_on_one_and_two_threads(const Op& op, const std::map<ValueId, Tensor>& full) {
  const std::vector<const Tensor*> ins = {&full.at(0), &full.at(1)};
  Tensor one = Tensor::tile(DType::kF32, op.results[0].proj.image(op.space.box())), two = one;
  kernels::KernelOptions o1, o2;
  o2.threads = 2;
  o2.grain = 1;
  ASSERT_TRUE(kernels::run(op, op.space.box(), ins, {&one}, o1).ok() &&
              kernels::run(op, op.space.box(), ins, {&two}, o2).ok());
  EXPECT_TRUE(kernels::onednn_sgemm_first() ||
              std::memcmp(one.f32(), two.f32(), sizeof(float) * one.numel()) == 0);
}

// Products of 1-3 rows, B as rows of depth 64-600: with OpenBLAS's one-thread sgemm (at one thread,
// as the CLI sets it) 1-2 rows are dot products (KernelSkinny.cpp); a column split changes no bits.
TEST(FastKernels, ProductsOfOneOrTwoRowsMatchTheReference) {
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  std::mt19937 rng(67);
  const std::vector<std::string> specs = {"mk,nk->mn", "km,nk->mn", "mk,nk->nm"};
  for (int trial = 0; trial < 60; ++trial) {
    Graph g;
    Ops ops(g);
    const std::string spec = specs[trial % specs.size()];
    std::map<char, int64_t> ext = {
        {'m', uniform(rng, 1, 3)}, {'n', uniform(rng, 1, 80)}, {'k', uniform(rng, 64, 600)}};
    einsum_of(ops, spec, ext);
    SCOPED_TRACE(spec + " n " + std::to_string(ext['n']) + " k " + std::to_string(ext['k']));
    std::map<ValueId, Tensor> full;
    for (int round = 0; round < 3; ++round)
      EXPECT_TRUE(check_op(g, g.op(0), full, rng, round == 0));
    // The whole box on one thread and on two (columns split at grain 1).
    expect_same_bits_on_one_and_two_threads(g.op(0), full);
  }
  openblas_set_num_threads(blas_threads);
}

// Products of at least 2^22 multiply-adds, which on AVX2-only hosts run in heddle's packed sgemm
// (KernelGemm.cpp): sizes off every blocking edge (rows not a multiple of the 6-row register tile,
// columns not of 16, depths not of 8 or of the 256-deep blocks), in the four transpositions and
// with the result stored either way round; on the whole box and random sub-boxes and tiles
// (strided operands, accumulation, 1-3 threads). The whole box on one thread and on two (rows or
// columns split at grain 1, halves still of 2^22 multiply-adds or more) gives the same bits. Then
// the products that on AVX-512 hosts leave oneDNN's sgemm (sgemm1 in KernelContraction.cpp): B
// transposed with 16-256 rows or with more rows and at most 256 columns (oneDNN's matmul
// primitive, ViT's and GPT's input gradients) and A transposed with a depth of at most 256 (the
// packed sgemm, ViT's weight gradients), at random sizes on and off those bounds.
TEST(FastKernels, LargeProductsMatchTheReferenceAndSplitsChangeNoBits) {
  std::mt19937 rng(73);
  const std::vector<std::string> specs = {"mk,kn->mn", "km,kn->mn", "mk,nk->mn",
                                          "km,nk->mn", "mk,kn->nm", "km,nk->nm"};
  int64_t checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    std::string spec = specs[trial % specs.size()];
    std::map<char, int64_t> ext = {{'m', uniform(rng, 190, 260)},
                                   {'n', uniform(rng, 190, 260)},
                                   {'k', uniform(rng, 260, 400)}};
    if (trial >= 24) {  // B transposed, more than 256 rows, columns either side of 256
      spec = trial % 2 == 0 ? "mk,nk->mn" : "mk,nk->nm";
      const int64_t m = uniform(rng, 257, 320), n = uniform(rng, 200, 300);
      ext = {{'m', m}, {'n', n}, {'k', (int64_t{1} << 22) / (m * n) + uniform(rng, 1, 40)}};
    } else if (trial >= 12) {
      const bool few_rows = trial % 2 == 0;  // else shallow depth
      spec = few_rows ? (trial % 4 == 0 ? "mk,nk->mn" : "mk,nk->nm")
                      : (trial % 4 == 1 ? "km,kn->mn" : "km,kn->nm");
      const int64_t edge = few_rows ? uniform(rng, 12, 260) : uniform(rng, 40, 260);
      const int64_t other = uniform(rng, 200, 400);
      const int64_t rest = (int64_t{1} << 22) / (edge * other) + uniform(rng, 1, 40);
      ext = few_rows ? std::map<char, int64_t>{{'m', edge}, {'n', other}, {'k', rest}}
                     : std::map<char, int64_t>{{'m', other}, {'n', rest}, {'k', edge}};
    }
    Graph g;
    Ops ops(g);
    einsum_of(ops, spec, ext);
    ASSERT_TRUE(ops.ok()) << spec << ": " << ops.status().error().message;
    SCOPED_TRACE(spec + " m " + std::to_string(ext['m']) + " n " + std::to_string(ext['n']) +
                 " k " + std::to_string(ext['k']));
    std::map<ValueId, Tensor> full;
    for (int round = 0; round < 2; ++round) checked += check_op(g, g.op(0), full, rng, round == 0);
    // (The later sizes' halves fall under 2^22 and so to another kernel.)
    if (trial < 12) expect_same_bits_on_one_and_two_threads(g.op(0), full);
  }
  EXPECT_EQ(checked, 60);
}

// Contractions whose first operand is a routing mask of mostly zeros (MoE's dispatch "tec,th->ech"
// and combine "tec,ech->th", and plain products with it stored either way round): the kernel
// multiplies only the nonzeros when the mask is large (at least 2^16 elements) and holds fewer
// than 1 in 32 nonzeros. One-hot masks (one 1 per slot) and masks of random gates at random
// densities, on the whole box (the sparse path) and random sub-boxes and tiles.
TEST(FastKernels, ContractionsWithAMaskOfMostlyZerosMatchTheReference) {
  std::mt19937 rng(61);
  const std::vector<std::string> specs = {"tec,th->ech", "tec,ech->th", "mk,kn->mn", "km,kn->mn",
                                          "mk,kn->nm"};
  int64_t checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Graph g;
    Ops ops(g);
    const std::string spec = specs[trial % specs.size()];
    std::map<char, int64_t> ext = {{'t', uniform(rng, 256, 320)}, {'e', uniform(rng, 2, 4)},
                                   {'c', uniform(rng, 128, 160)}, {'h', uniform(rng, 1, 9)},
                                   {'m', uniform(rng, 256, 300)}, {'k', uniform(rng, 256, 300)},
                                   {'n', uniform(rng, 1, 9)}};
    ValueId a = einsum_of(ops, spec, ext);
    ASSERT_TRUE(ops.ok()) << spec << ": " << ops.status().error().message;
    // The mask: zeros but for one element in `every` (a one-hot 1 or a random gate).
    Tensor mask(g.type(a));
    const int64_t every = uniform(rng, 33, 400);
    const bool one_hot = uniform(rng, 0, 1) == 1;
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.f32()[i] = uniform(rng, 0, every - 1) != 0 ? 0.0f
                      : one_hot                       ? 1.0f
                                : std::uniform_real_distribution<float>(-1, 1)(rng);
    SCOPED_TRACE(spec + " one nonzero in " + std::to_string(every));
    std::map<ValueId, Tensor> full;
    full.emplace(a, std::move(mask));
    for (int round = 0; round < 3; ++round) checked += check_op(g, g.op(0), full, rng, round == 0);
  }
  EXPECT_EQ(checked, 120);
}

// Plain products in the four transpositions either side of the rule by which the one-thread
// sgemm on AVX2-only hosts is oneDNN's instead of OpenBLAS's (sgemm1 in KernelContraction.cpp:
// under 2^22 multiply-adds with m and n multiples of 8), and attention's small per-head shapes:
// both libraries' results match the reference, on the whole box (one product) and random
// sub-boxes and tiles.
TEST(FastKernels, ProductsEitherSideOfTheSmallProductSizeMatchTheReference) {
  std::mt19937 rng(71);
  const std::vector<std::string> specs = {"mk,kn->mn", "km,kn->mn", "mk,nk->mn", "km,nk->mn"};
  // m x n x k: 128x128x255 (just under 2^22), 100x160x262 (under, m not a multiple of 8),
  // 128x128x257 (just over), 256x128x256 (2^23), and the 32x128x64 and 32x64x128 blocks of
  // causal attention.
  const std::vector<std::array<int64_t, 3>> sizes = {{128, 128, 255}, {100, 160, 262},
                                                     {128, 128, 257}, {256, 128, 256},
                                                     {32, 128, 64},   {32, 64, 128}};
  int64_t checked = 0;
  for (const auto& [m, n, k] : sizes)
    for (const std::string& spec : specs) {
      Graph g;
      Ops ops(g);
      einsum_of(ops, spec, {{'m', m}, {'n', n}, {'k', k}});
      ASSERT_TRUE(ops.ok()) << spec << ": " << ops.status().error().message;
      SCOPED_TRACE(spec + " m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                   std::to_string(k));
      std::map<ValueId, Tensor> full;
      for (int round = 0; round < 2; ++round)
        checked += check_op(g, g.op(0), full, rng, round == 0);
    }
  EXPECT_EQ(checked, 48);
}

// Convolution-network elementwise ops (NCHW, per-channel broadcasts [C, 1, 1], residual adds)
// and AdamW on convolution weights: the fast loops merge the trailing dims every operand walks
// regularly into one row, which happens on whole boxes of whole tiles and must not when a tile
// is wider than the box.
TEST(FastKernels, ConvNetElementwiseOpsOnMergedRowsMatchTheReference) {
  std::mt19937 rng(17);
  int64_t checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g;
    Ops ops(g);
    int64_t n = uniform(rng, 1, 3), c = uniform(rng, 1, 9), h = uniform(rng, 1, 6),
            w = uniform(rng, 1, 6);
    ValueId x = ops.param("x", f32({n, c, h, w}));
    ValueId res = ops.param("res", f32({n, c, h, w}));
    ValueId scale = ops.param("scale", f32({c, 1, 1})), shift = ops.param("shift", f32({c, 1, 1}));
    ValueId row = ops.param("row", f32({w}));
    ValueId bn = ops.add(ops.mul(x, scale), shift);
    std::vector<ValueId> ys = {ops.relu(bn),      ops.add(bn, res),
                               ops.mul(scale, x), ops.binary(OpKind::kSub, x, row),
                               ops.silu(x),       ops.unary(OpKind::kSigmoid, x)};
    // AdamW on a convolution weight [CO, CI, KH, KW] (1x1 taps: rows of one element).
    const int64_t k = uniform(rng, 0, 1) ? 1 : 3;
    TensorType wt = f32({c, uniform(rng, 1, 9), k, k});
    for (ValueId y : ops.adamw(ops.param("w", wt), ops.param("dw", wt), ops.param("m", wt),
                               ops.param("v", wt), AdamWOptions{}, uniform(rng, 1, 4)))
      ys.push_back(y);
    for (ValueId y : ys) ops.output(y);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    checked += check_ops(g, rng);
    // The batch norm chain mul -> add -> relu over the whole space, its middle values temporary.
    std::vector<kernels::ChainCall> calls;
    for (OpId id = 0; id < 3; ++id) calls.push_back({id, g.op(id).space.box()});
    EXPECT_EQ(g.op(2).kind, OpKind::kRelu);
    check_chain(g, calls, {g.op(0).results[0].value, g.op(1).results[0].value}, rng);
  }
  EXPECT_GT(checked, 2000);
}

// A product and a random elementwise tail of 2-7 ops over [B, Q, K] (K >= Q, the causal mask's
// keys), each op over one random sub-box, through run_chain against the reference.
void check_random_chain(std::mt19937& rng, int64_t B, int64_t Q, int64_t K, int64_t M) {
  Graph g;
  Ops ops(g);
  ValueId a = ops.param("a", f32({B, Q, M}));
  ValueId w = ops.param("w", f32({M, K}));
  ValueId bias = ops.param("bias", f32({K}));
  ValueId y = ops.param("y", f32({B, 1, K}));
  ValueId c = ops.input("c", TensorType(DType::kBool, IVec{B, Q, K}));
  // einsum (not fusable) then a random elementwise tail.
  std::vector<ValueId> vs = {ops.einsum("bqm,mk->bqk", a, w)};
  int len = static_cast<int>(uniform(rng, 2, 7));
  for (int i = 0; i < len; ++i) {
    ValueId v = vs.back();
    switch (uniform(rng, 0, 8)) {
      case 0:
        vs.push_back(ops.add(v, bias));
        break;
      case 1:
        vs.push_back(ops.gelu(v));
        break;
      case 2:
        vs.push_back(ops.mul(y, v));
        break;
      case 3:
        vs.push_back(ops.scale(v, 0.37));
        break;
      case 4:
        vs.push_back(ops.causal_mask(ops.silu(v)));
        break;
      case 5:
        vs.push_back(ops.where(c, v, y));
        break;
      case 6:
        vs.push_back(ops.unary(OpKind::kTanh, v));
        break;
      case 7:
        vs.push_back(ops.binary(OpKind::kMaximum, v, bias));
        break;
      default:
        vs.push_back(ops.sub(v, vs[0]));  // reads a surviving value of the chain
        break;
    }
  }
  ops.output(vs.back());
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  // Every elementwise op of the chain over one random sub-box of the common [B, Q, K] space;
  // the einsum over its whole space.
  Box box = random_sub_box(Box::of_shape(IVec{B, Q, K}), rng);
  std::vector<kernels::ChainCall> calls;
  std::vector<ValueId> temps;
  for (OpId id = 0; id < g.num_ops(); ++id)
    calls.push_back({id, g.op(id).kind == OpKind::kEinsum ? g.op(id).space.box() : box});
  // Values read only by the next call are temporaries (the lowering's rule); others survive.
  for (size_t i = 0; i + 1 < calls.size(); ++i) {
    ValueId v = g.op(calls[i].op).results[0].value;
    int uses = 0;
    for (const Op& op : g.ops())
      for (const auto& x : op.inputs) uses += x.value == v;
    if (uses == 1 && v != vs.back()) temps.push_back(v);
  }
  check_chain(g, calls, temps, rng);
}

TEST(FusedChains, HandMadeChainsOnRandomBoxesMatchTheReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t q = uniform(rng, 1, 9);
    check_random_chain(rng, uniform(rng, 1, 3), q, q + uniform(rng, 0, 2), uniform(rng, 1, 5));
  }
}

// The same on rows of 1000-3000 elements: rows run in several blocks, whose length depends on how
// many buffers a group has (kMinBlock..kMaxBlock in src/ops/Chain.cpp), and end in a partial one.
TEST(FusedChains, HandMadeChainsOnLongRowsMatchTheReference) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t q = uniform(rng, 1, 3);
    check_random_chain(rng, uniform(rng, 1, 2), q, uniform(rng, 1000, 3000), uniform(rng, 1, 3));
  }
}

// ReLU6 as the ONNX import makes it (Clip: maximum with a scalar, then minimum with one) and its
// gradients (elementwise_grad of maximum and minimum, to x and to the bound), op by op and as
// chains, on random NCHW shapes; the bounds are random in [-1, 1] like x, so both sides of
// each comparison occur.
TEST(FusedChains, ClampForwardAndBackwardMatchTheReference) {
  std::mt19937 rng(23);
  int64_t checked = 0, chains = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Graph g;
    Ops ops(g);
    std::vector<int64_t> shape = {uniform(rng, 1, 3), uniform(rng, 1, 9), uniform(rng, 1, 6),
                                  uniform(rng, 1, 6)};
    ValueId x = ops.param("x", f32(shape)), w = ops.param("w", f32(shape));
    ValueId lo = ops.param("lo", f32({})), hi = ops.param("hi", f32({}));
    ValueId y = ops.binary(OpKind::kMinimum, ops.binary(OpKind::kMaximum, x, lo), hi);
    ValueId loss = ops.reduce(OpKind::kReduceSum, ops.mul(y, w), {0, 1, 2, 3});
    ops.output(loss);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    auto gr = build_gradients(g, loss);
    ASSERT_TRUE(gr.ok()) << gr.error().to_string();
    for (int round = 0; round < 3; ++round) checked += check_ops(gr->graph, rng);
    testing::for_each_chain(gr->graph,
                            [&](const std::vector<OpId>& ids, const std::vector<ValueId>& temps) {
                              std::vector<kernels::ChainCall> calls;
                              for (OpId id : ids)
                                calls.push_back({id, gr->graph.op(id).space.box()});
                              check_chain(gr->graph, calls, temps, rng);
                              ++chains;
                            });
  }
  EXPECT_GT(checked, 300);
  EXPECT_GE(chains, 40);
}

// Chains as the lowering forms them (each next op elementwise, reading the previous result,
// its only use) in the transformers' training graphs, forward and backward.
TEST(FusedChains, ChainsOfTheTransformersTrainingStepsMatchTheReference) {
  std::mt19937 rng(3);
  int64_t chains = 0;
  for (const char* name : {"gpt-tiny", "llama-tiny", "moe-tiny"}) {
    SCOPED_TRACE(name);
    Graph g = train_graph(name);
    testing::for_each_chain(g,
                            [&](const std::vector<OpId>& ops, const std::vector<ValueId>& temps) {
                              std::vector<kernels::ChainCall> calls;
                              for (OpId id : ops) calls.push_back({id, g.op(id).space.box()});
                              check_chain(g, calls, temps, rng);
                              ++chains;
                            });
  }
  EXPECT_GT(chains, 8);
}

// The gradients of one layernorm or rmsnorm (dx, the scale's, the shift's), as lowering fuses
// them into one instruction: run_chain_into takes them in one pass over the rows (moments once
// per row), and each result has the bits its own call gives (random shapes, rows not a multiple
// of 8, sub-boxes of the rows; the calls in either order).
TEST(FastKernels, TheGradientsOfOneNormRunInOnePassWithTheBitsOfTheirOwnCalls) {
  std::mt19937 rng(83);
  const int64_t before = kernels::norm_grad_passes();
  for (int trial = 0; trial < 40; ++trial) {
    Graph g;
    Ops ops(g);
    const bool layer = trial % 2 == 0;
    const int64_t h = uniform(rng, 1, 300);
    ValueId x = ops.param("x", f32({uniform(rng, 1, 3), uniform(rng, 1, 20), h}));
    ValueId gamma = ops.param("gamma", f32({h}));
    ValueId y =
        layer ? ops.layernorm(x, gamma, ops.param("beta", f32({h}))) : ops.rmsnorm(x, gamma);
    ValueId loss = ops.reduce(OpKind::kReduceSum, ops.mul(y, ops.input("r", g.type(y))), {0, 1, 2});
    ops.output(loss);
    ASSERT_TRUE(ops.ok()) << ops.status().error().message;
    auto grads = build_gradients(g, loss);
    ASSERT_TRUE(grads.ok()) << grads.error().to_string();
    const Graph& G = grads->graph;
    std::vector<const Op*> ngs;
    for (const Op& op : G.ops())
      if (op.kind == OpKind::kNormGrad) ngs.push_back(&op);
    ASSERT_EQ(ngs.size(), layer ? 3u : 2u);
    if (trial % 4 >= 2) std::reverse(ngs.begin(), ngs.end());
    SCOPED_TRACE(std::string(layer ? "layernorm" : "rmsnorm") + " h " + std::to_string(h));
    const Box rows = random_sub_box(ngs[0]->space.box(), rng);
    std::vector<Tensor> in;
    for (const auto& o : ngs[0]->inputs) in.push_back(random_tensor(G.type(o.value), rng, -2, 2));
    std::vector<const Tensor*> ins;
    for (const Tensor& t : in) ins.push_back(&t);
    std::vector<Tensor> fused, own;
    for (const Op* op : ngs) {
      fused.push_back(random_tensor(G.type(op->results[0].value), rng));
      own.push_back(fused.back().crop(fused.back().region()));
    }
    std::vector<kernels::BoundCall> calls;
    for (size_t q = 0; q < ngs.size(); ++q) calls.push_back({ngs[q], rows, ins, {&fused[q]}});
    ASSERT_TRUE(kernels::run_chain_into(calls, {}).ok());
    for (size_t q = 0; q < ngs.size(); ++q) {
      ASSERT_TRUE(kernels::run(*ngs[q], rows, ins, {&own[q]}).ok());
      EXPECT_EQ(0, std::memcmp(fused[q].f32(), own[q].f32(), sizeof(float) * own[q].numel()))
          << "wrt " << std::get<int64_t>(ngs[q]->attrs.at("wrt"));
    }
  }
  EXPECT_EQ(kernels::norm_grad_passes() - before, 40);
}

}  // namespace
}  // namespace heddle
