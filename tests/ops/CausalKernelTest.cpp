// The causal-mask analysis and the kernels that use it against the generic reference loops: the
// attention products of a causal training step are found, masked contractions skip the hidden
// blocks and match the reference on random boxes and tiles, and softmax over a causal mask does.
#include <gtest/gtest.h>

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

// Calls f(p) for every global coordinate p of `t`'s region.
template <class F>
void for_each_coordinate(const Tensor& t, F f) {
  const Box r = t.region();
  if (r.empty()) return;
  std::vector<int64_t> p(r.start().values());
  while (true) {
    f(IVec(p));
    int64_t d = r.rank() - 1;
    for (; d >= 0; --d) {
      if (++p[d] < r.end()[d]) break;
      p[d] = r.start()[d];
    }
    if (d < 0) return;
  }
}

bool hidden_at(const IVec& p, int64_t shift) {
  const int64_t r = p.size();
  return p[r - 1] > p[r - 2] + shift;
}

// A contraction told that an operand is causally masked: its einsum spec, and which operand
// (a result, or input `operand`).
struct MaskedCase {
  std::string spec;
  bool result;
  int32_t operand;
};

// Builds the einsum of `c` into `g` (its op 0), each index letter's extent from `extent`, and
// returns random operands for it, a masked input zero where `shift` hides it.
template <class F>
std::vector<Tensor> masked_einsum(Graph& g, const MaskedCase& c, int64_t shift, std::mt19937& rng,
                                  F extent) {
  Ops ops(g);
  std::map<char, int64_t> ext;
  for (char ch : c.spec)
    if (std::isalpha(static_cast<unsigned char>(ch)) && !ext.count(ch)) ext[ch] = extent(ch);
  einsum_of(ops, c.spec, ext);
  EXPECT_TRUE(ops.ok());
  std::vector<Tensor> ins;
  for (const auto& x : g.op(0).inputs) {
    ins.push_back(testing::random_tensor(g.type(x.value), rng, -1.0, 1.0, 2));
    if (!c.result && &x == &g.op(0).inputs[c.operand])
      for_each_coordinate(ins.back(), [&](const IVec& p) {
        if (hidden_at(p, shift)) ins.back().set(p, 0.0);
      });
  }
  return ins;
}

// The attention products of a causal training step are found by the analysis: the scores and
// their gradient dP (results the mask hides in part) and the four products that sum over the
// probabilities or the masked scores' gradient (inputs that are zero where it hides).
TEST(FastKernels, TheCausalAnalysisFindsEveryAttentionProduct) {
  Graph g = small_train_graph("gpt-tiny", 6, 16, 2, 11);
  int64_t masks = 0, results = 0, inputs = 0, einsums = 0, softmaxes = 0;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    masks += g.op(id).kind == OpKind::kCausalMask;
    einsums += g.op(id).kind == OpKind::kEinsum;
    auto c = kernels::causal_operand(g, id);
    if (!c) continue;
    EXPECT_EQ(c->shift, 0);
    if (g.op(id).kind == OpKind::kSoftmax) {
      EXPECT_FALSE(c->result);
      ++softmaxes;
      continue;
    }
    (c->result ? results : inputs) += 1;
  }
  EXPECT_EQ(softmaxes, masks);
  EXPECT_GT(masks, 0);
  EXPECT_EQ(results, 2 * masks);
  EXPECT_EQ(inputs, 4 * masks);
  EXPECT_GT(einsums, 6 * masks);  // the linear layers are not masked
  // Without the mask (or with the scores also read elsewhere) nothing is masked.
  Graph plain;
  Ops ops(plain);
  ValueId q = ops.param("q", f32({8, 4})), k = ops.param("k", f32({8, 4}));
  ValueId scores = ops.einsum("qd,kd->qk", q, k);
  ops.output(ops.einsum("qk,kd->qd", ops.softmax(scores, -1), k));
  ValueId masked = ops.einsum("qd,kd->qk", q, k);
  ops.output(ops.einsum("qk,kd->qd", ops.softmax(ops.causal_mask(masked), -1), k));
  ops.output(masked);
  ASSERT_TRUE(ops.ok());
  // Only the last product and its softmax are found: its probabilities are masked (the masked
  // scores are also an output, so their product is not).
  for (OpId id = 0; id < plain.num_ops(); ++id) {
    auto c = kernels::causal_operand(plain, id);
    const bool last = id + 2 >= plain.num_ops();
    EXPECT_EQ(c.has_value(), last) << "op " << id;
    if (c) {
      EXPECT_FALSE(c->result);
    }
  }
}

// Contractions told that an operand is causally masked (KernelOptions::causal) skip the blocks
// above the diagonal: on random shapes (queries and keys of up to 100, so several blocks of 32),
// shifts, sub-boxes, tiles, accumulation and threads, a masked input (zero where hidden) gives the
// reference's result everywhere, and a masked result matches it wherever the mask leaves it
// visible and is finite elsewhere. The attention products of a training step and plain ones, and
// masked results stored either way round (written as C or as C^T = B^T A^T).
TEST(FastKernels, CausallyMaskedContractionsMatchTheReference) {
  std::mt19937 rng(43);
  // Scores (and dP = dO V^T), P V (and dQ = dS K), dV = P^T dO, dK = dS^T Q; plain products.
  const std::vector<MaskedCase> cases = {
      {"bqhd,bkhd->bhqk", true, 0},  {"bhqk,bkhd->bqhd", false, 0}, {"bhqk,bqhd->bkhd", false, 0},
      {"bqhd,bhqk->bkhd", false, 1}, {"qk,kn->qn", false, 0},       {"kq,kn->qn", false, 0},
      {"nk,kq->nq", false, 1},       {"qd,kd->qk", true, 0},        {"kd,qd->kq", true, 0},
      {"qd,kd->kq", true, 0},        {"kd,qd->qk", true, 0}};
  int64_t checked = 0;
  for (int trial = 0; trial < 330; ++trial) {
    const MaskedCase& c = cases[trial % cases.size()];
    const kernels::CausalOperand hint{c.result, c.operand, uniform(rng, -40, 40)};
    SCOPED_TRACE(c.spec + " shift " + std::to_string(hint.shift));
    Graph g;
    std::vector<Tensor> full = masked_einsum(g, c, hint.shift, rng, [&](char ch) {
      return std::string("bh").find(ch) != std::string::npos   ? uniform(rng, 1, 2)
             : std::string("dn").find(ch) != std::string::npos ? uniform(rng, 1, 9)
                                                               : uniform(rng, 20, 100);
    });
    ASSERT_FALSE(HasFailure());
    const Op& op = g.op(0);
    const Box box = trial % 3 == 0 ? op.space.box() : random_sub_box(op.space.box(), rng);
    std::vector<Tensor> ins;
    std::vector<const Tensor*> in_ptrs;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      ins.push_back(
          full[i].crop(random_cover(op.inputs[i].proj.image(box), full[i].region(), rng)));
    for (auto& t : ins) in_ptrs.push_back(&t);
    Tensor whole = testing::random_tensor(g.type(op.results[0].value), rng, -1.0, 1.0, 2);
    Tensor out_fast = whole.crop(random_cover(op.results[0].proj.image(box), whole.region(), rng));
    Tensor out_ref = out_fast;
    kernels::KernelOptions fast, ref;
    ref.reference = true;
    fast.accumulate = ref.accumulate = uniform(rng, 0, 1) == 1;
    fast.threads = static_cast<int>(uniform(rng, 1, 3));
    if (uniform(rng, 0, 1) == 1) fast.grain = 1;
    fast.causal = &hint;
    ASSERT_TRUE(kernels::run(op, box, in_ptrs, {&out_fast}, fast).ok());
    ASSERT_TRUE(kernels::run(op, box, in_ptrs, {&out_ref}, ref).ok());
    double worst = 0;
    for_each_coordinate(out_ref, [&](const IVec& p) {
      const double x = out_fast.at(p), y = out_ref.at(p);
      if (c.result && hidden_at(p, hint.shift)) {
        EXPECT_TRUE(std::isfinite(x));
        return;
      }
      worst = std::max(worst, std::fabs(x - y) / (1 + std::fabs(y)));
    });
    EXPECT_LT(worst, 2e-4) << "box " << box.to_string();
    ++checked;
  }
  EXPECT_EQ(checked, 330);
}

// Masked contractions of longer sequences (150-300 queries and keys: several of the packed
// kernel's 144-row blocks, and more than its 256-deep depth block where the mask narrows the
// depth) on one head, whole or in part, accumulating or not: they match the reference where
// visible; and on hosts that run them as one packed product (AVX2 and FMA: where the mask
// narrows the depth, and where it hides part of the result, which then computes only the register
// tiles with a visible element), splitting them over 2 or 3 threads changes no bit of the result.
TEST(FastKernels, LongCausalProductsMatchTheReferenceAndSplitsChangeNoBits) {
  std::mt19937 rng(53);
  const std::vector<MaskedCase> cases = {{"qd,kd->qk", true, 0},
                                         {"qk,kd->qd", false, 0},
                                         {"qk,qd->kd", false, 0},
                                         {"kd,qd->kq", true, 0},
                                         {"bqhd,bhqk->bkhd", false, 1}};
  for (int trial = 0; trial < 30; ++trial) {
    const MaskedCase& c = cases[trial % cases.size()];
    const kernels::CausalOperand hint{c.result, c.operand, uniform(rng, -60, 60)};
    SCOPED_TRACE(c.spec + " shift " + std::to_string(hint.shift));
    Graph g;
    std::vector<Tensor> ins = masked_einsum(g, c, hint.shift, rng, [&](char ch) {
      return std::string("bh").find(ch) != std::string::npos ? 1
             : ch == 'd'                                     ? uniform(rng, 1, 20)
                                                             : uniform(rng, 150, 300);
    });
    ASSERT_FALSE(HasFailure());
    const Op& op = g.op(0);
    std::vector<const Tensor*> in_ptrs;
    for (auto& t : ins) in_ptrs.push_back(&t);
    const Box box = trial % 2 == 0 ? op.space.box() : random_sub_box(op.space.box(), rng);
    const Box img = op.results[0].proj.image(box);
    Tensor whole = testing::random_tensor(g.type(op.results[0].value), rng, -1.0, 1.0, 2);
    Tensor out_ref = whole.crop(img);
    kernels::KernelOptions ref;
    ref.reference = true;
    ASSERT_TRUE(kernels::run(op, box, in_ptrs, {&out_ref}, ref).ok());
    std::vector<Tensor> outs;
    for (int threads = 1; threads <= 3; ++threads) {
      kernels::KernelOptions fast;
      fast.threads = threads;
      fast.grain = 1;
      fast.causal = &hint;
      fast.accumulate = trial % 3 == 1;
      outs.push_back(whole.crop(img));
      ASSERT_TRUE(kernels::run(op, box, in_ptrs, {&outs.back()}, fast).ok());
    }
    Tensor ref_sum = out_ref;  // what accumulating gives: the tile's values plus the product
    if (trial % 3 == 1)
      for_each_coordinate(ref_sum,
                          [&](const IVec& p) { ref_sum.set(p, whole.at(p) + out_ref.at(p)); });
    double worst = 0;
    for_each_coordinate(ref_sum, [&](const IVec& p) {
      if (c.result && hidden_at(p, hint.shift)) return;
      const double x = outs[0].at(p), y = ref_sum.at(p);
      worst = std::max(worst, std::fabs(x - y) / (1 + std::fabs(y)));
    });
    EXPECT_LT(worst, 2e-4) << "box " << box.to_string();
    // Elsewhere the product runs as 32-row blocks through oneDNN's sgemm, whose blocks may round
    // differently at another split.
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) continue;
    for (int t = 1; t < 3; ++t) {
      EXPECT_EQ(0, std::memcmp(outs[0].f32(), outs[t].f32(),
                               sizeof(float) * static_cast<size_t>(img.volume())))
          << (t + 1) << " threads, box " << box.to_string();
    }
  }
}

// A softmax over a causal mask's result told so (KernelOptions::causal) reads each row's visible
// prefix only: on random shapes, shifts (rows with no visible key included), sub-boxes and tiles
// it equals the reference everywhere, the hidden probabilities exactly 0.
TEST(FastKernels, SoftmaxOverACausalMaskMatchesTheReference) {
  std::mt19937 rng(47);
  for (int trial = 0; trial < 60; ++trial) {
    Graph g;
    Ops ops(g);
    const int64_t q = uniform(rng, 1, 70), k = uniform(rng, 1, 70);
    ValueId x = ops.param("x", f32({uniform(rng, 1, 2), q, k}));
    ops.output(ops.softmax(x, -1));
    ASSERT_TRUE(ops.ok());
    const Op& op = g.op(0);
    const int64_t s0 = k - q;  // keys aligned at the end, give or take 5
    const kernels::CausalOperand hint{false, 0, uniform(rng, s0 - 5, s0 + 5)};
    SCOPED_TRACE("q " + std::to_string(q) + " k " + std::to_string(k) + " shift " +
                 std::to_string(hint.shift));
    Tensor full = testing::random_tensor(g.type(x), rng, -3.0, 3.0, 2);
    for_each_coordinate(full, [&](const IVec& p) {
      if (hidden_at(p, hint.shift)) full.set(p, -INFINITY);
    });
    const Box box = trial % 2 == 0 ? op.space.box() : random_sub_box(op.space.box(), rng);
    Tensor in = full.crop(random_cover(op.inputs[0].proj.image(box), full.region(), rng));
    Tensor whole = testing::random_tensor(g.type(op.results[0].value), rng, -1.0, 1.0, 2);
    Tensor out_fast = whole.crop(random_cover(op.results[0].proj.image(box), whole.region(), rng));
    Tensor out_ref = out_fast;
    kernels::KernelOptions fast, ref;
    ref.reference = true;
    fast.causal = &hint;
    ASSERT_TRUE(kernels::run(op, box, {&in}, {&out_fast}, fast).ok());
    ASSERT_TRUE(kernels::run(op, box, {&in}, {&out_ref}, ref).ok());
    EXPECT_LT(tile_diff(out_fast, out_ref), 2e-4) << "box " << box.to_string();
    const Box img = op.results[0].proj.image(box);
    for_each_coordinate(out_ref, [&](const IVec& p) {
      // (a row with no visible key is NaN, as the reference's)
      if (hidden_at(p, hint.shift) && p[1] + hint.shift >= 0 && img.contains(p)) {
        EXPECT_EQ(out_fast.at(p), 0.0);
      }
    });
  }
}

}  // namespace
}  // namespace heddle
