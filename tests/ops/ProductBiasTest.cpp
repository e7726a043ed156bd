// A linear layer's product and the add of its bias, one instruction as lowering fuses them, run
// through run_chain_into (src/ops/KernelProductBias.cpp): on AVX-512 hosts a plain product of at
// least 2^22 multiply-adds and depth at most 256 runs in oneDNN's matmul primitive with the bias
// in its epilogue and never writes the product without the bias; other products, hosts and
// layouts run the two calls one by one. Random sizes on both sides of those bounds, the weight
// and the input either way round, the bias as either operand of the add, operand tiles cut from
// wider ones and 1-2 threads, against the two calls through the reference loops.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

using testing::all_nan;
using testing::nan_tile;
using testing::uniform;

TEST(FusedChains, ALinearLayersBiasAddedInTheProductsEpilogueMatchesTheReference) {
  std::mt19937 rng(83);
  const std::vector<std::string> specs = {"abk,kn->abn", "mk,kn->mn", "mk,nk->mn", "km,kn->mn"};
  int64_t fused = 0, expected = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::string spec = specs[trial % specs.size()];
    // Depths either side of 256; sizes either side of 2^22 multiply-adds.
    const int64_t k = uniform(rng, 200, 300), n = uniform(rng, 60, 300);
    const int64_t rows = (int64_t{1} << 22) / (k * n) + uniform(rng, -40, 200);
    const int64_t a = uniform(rng, 1, 3), b = (rows + a - 1) / a;
    Graph g;
    Ops ops(g);
    ValueId x = spec[0] == 'a'   ? ops.param("x", f32({a, b, k}))
                : spec[0] == 'm' ? ops.param("x", f32({a * b, k}))
                                 : ops.param("x", f32({k, a * b}));
    ValueId w = spec == "mk,nk->mn" ? ops.param("w", f32({n, k})) : ops.param("w", f32({k, n}));
    ValueId bias = ops.param("bias", f32({n}));
    ValueId p = ops.einsum(spec, x, w);
    const bool bias_first = trial % 3 == 0;
    ValueId y = bias_first ? ops.add(bias, p) : ops.add(p, bias);
    ops.output(y);
    ASSERT_TRUE(ops.ok()) << spec << ": " << ops.status().error().message;
    const Op& prod = g.op(g.value(p).producer);
    const Op& add = g.op(g.value(y).producer);
    kernels::KernelOptions o;
    o.threads = static_cast<int>(uniform(rng, 1, 2));
    o.grain = 1;
    const int64_t m = a * b;
    // The sum into a tile wider than the box, or a random sub-box of the result's rows and
    // columns, or the whole box.
    const bool wide_out = trial % 5 == 4, whole = !wide_out && trial % 4 != 3;
    Box box = prod.space.box();
    if (!whole) {
      Box sub = testing::random_sub_box(box, rng);
      std::vector<int64_t> s(sub.start().values()), e(sub.end().values());
      for (int64_t d = 0; d < box.rank(); ++d)
        if (prod.space.dim(d).reduce) s[d] = 0, e[d] = box.end()[d];  // the whole depth
      box = Box(IVec(s), IVec(e));
    }
    const Box img = prod.results[0].proj.image(box);
    SCOPED_TRACE(spec + " m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                 std::to_string(k) + (bias_first ? " bias first" : "") + (whole ? "" : " sub-box") +
                 (wide_out ? " wide out" : "") + " threads " + std::to_string(o.threads));

    auto cut = [&](ValueId v, const Box& inner) {
      Tensor full = testing::random_tensor(g.type(v), rng, -1.0, 1.0);
      return full.crop(testing::random_cover(inner, full.region(), rng));
    };
    Tensor xt = cut(x, prod.inputs[0].proj.image(box)), wt = cut(w, prod.inputs[1].proj.image(box));
    const int bi = bias_first ? 0 : 1;
    Tensor bt = cut(bias, add.inputs[bi].proj.image(img));
    Tensor t = nan_tile(img);
    Tensor out_full = testing::random_tensor(g.type(y), rng, -1.0, 1.0);
    Tensor out = wide_out ? out_full.crop(testing::random_cover(img, out_full.region(), rng))
                          : Tensor::tile(DType::kF32, img);
    std::vector<const Tensor*> add_ins = {&t, &t};
    add_ins[bi] = &bt;
    std::vector<kernels::BoundCall> calls = {{&prod, box, {&xt, &wt}, {&t}},
                                             {&add, img, add_ins, {&out}}};
    ASSERT_TRUE(kernels::run_chain_into(calls, {p}, o).ok());

    kernels::KernelOptions ref;
    ref.reference = true;
    Tensor tr = Tensor::tile(DType::kF32, img), outr = Tensor::tile(DType::kF32, img);
    ASSERT_TRUE(kernels::run(prod, box, {&xt, &wt}, {&tr}, ref).ok());
    std::vector<const Tensor*> ref_ins = {&tr, &tr};
    ref_ins[bi] = &bt;
    ASSERT_TRUE(kernels::run(add, img, ref_ins, {&outr}, ref).ok());
    EXPECT_LT(testing::tile_diff(out.crop(img), outr), 1e-4);

    // Which path ran: the fused one leaves the product's own tile as it was.
    const int64_t rows_run = img.shape()[0] * (img.rank() == 3 ? img.shape()[1] : 1);
    const int64_t cols_run = img.shape()[img.rank() - 1];
    const bool want = kernels::onednn_sgemm_first() && out.region() == img &&
                      rows_run * cols_run * k >= (int64_t{1} << 22) && k <= 256;
    const bool got = all_nan(t);
    expected += want;
    fused += got;
    // (A sub-box of "abk" rows whose input tile is wider than the box is no plain product.)
    if (spec != "abk,kn->abn" || whole) {
      EXPECT_EQ(got, want);
    }
  }
  // On AVX-512 hosts about half the trials meet the bounds.
  if (kernels::onednn_sgemm_first()) {
    EXPECT_GT(expected, 10);
    EXPECT_GE(fused, expected - 3);
  }
}

}  // namespace
}  // namespace heddle
