// Property tests of the per-channel affine loops (KernelChannelAffine.cpp): a mul or add of a
// value per channel on NCHW planes, either operand order, and the mul's gradients, on random
// shapes (dims of 1 included) and random sub-boxes over whole or cropped tiles, bitwise against
// the reference loops (one float operation per element, so the results agree exactly).
#include <gtest/gtest.h>

#include <cstring>

#include "OpsTestUtil.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A random sub-box of `box` (each dim a random non-empty range).
Box sub_box(const Box& box, std::mt19937& rng) {
  std::vector<int64_t> lo, hi;
  for (int64_t d = 0; d < box.rank(); ++d) {
    lo.push_back(pick(rng, box.start()[d], box.end()[d] - 1));
    hi.push_back(pick(rng, lo.back() + 1, box.end()[d]));
  }
  return Box(IVec(lo), IVec(hi));
}

TEST(ChannelAffine, PerChannelMulAddAndTheirGradientsEqualTheReferenceBitwise) {
  std::mt19937 rng(165);
  int64_t checked = 0;
  const int64_t before = kernels::channel_affine_calls();
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("affine");
    Ops ops(g);
    const int64_t N = pick(rng, 1, 3), C = pick(rng, 1, 9), H = pick(rng, 1, 6),
                  W = pick(rng, 1, 6);
    ValueId x = ops.param("x", TensorType(DType::kF32, IVec{N, C, H, W}));
    ValueId s = ops.param("s", TensorType(DType::kF32, IVec{C, 1, 1}));
    ValueId t = ops.param("t", TensorType(DType::kF32, IVec{C, 1, 1}));
    ValueId y = pick(rng, 0, 1) ? ops.mul(x, s) : ops.mul(s, x);
    y = pick(rng, 0, 1) ? ops.add(y, t) : ops.add(t, y);
    ValueId w = ops.param("w", TensorType(DType::kF32, IVec{N, C, H, W}));
    ops.output(ops.reduce(OpKind::kReduceSum, ops.mul(y, w), {0, 1, 2, 3}));
    ASSERT_TRUE(ops.status().ok());
    auto grads = build_gradients(g, g.outputs()[0]);
    ASSERT_TRUE(grads.ok());
    const Graph& tg = grads->graph;
    for (const Op& op : tg.ops()) {
      // Elementwise ops only: the scale's gradient sums over the planes, in another order.
      if ((op.kind != OpKind::kMul && op.kind != OpKind::kAdd &&
           op.kind != OpKind::kElementwiseGrad) ||
          op.space.has_reduce())
        continue;
      std::vector<Tensor> in;
      for (const auto& v : op.inputs) in.push_back(testing::random_tensor(tg.type(v.value), rng));
      for (int k = 0; k < 3; ++k) {
        const Box box = k == 0 ? op.space.box() : sub_box(op.space.box(), rng);
        std::vector<Tensor> tiles;
        for (size_t i = 0; i < in.size(); ++i)
          tiles.push_back(pick(rng, 0, 1)
                              ? in[i].crop(in[i].region())
                              : in[i].crop(op.inputs[i].proj.image(box).intersect(in[i].region())));
        std::vector<const Tensor*> ip;
        for (const auto& tile : tiles) ip.push_back(&tile);
        const Box image = op.results[0].proj.image(box);
        Tensor got = Tensor::tile(DType::kF32, image), want = Tensor::tile(DType::kF32, image);
        got.fill(1e6);
        kernels::KernelOptions ref;
        ref.reference = true;
        ASSERT_TRUE(kernels::run(op, box, ip, {&got}).ok());
        ASSERT_TRUE(kernels::run(op, box, ip, {&want}, ref).ok());
        EXPECT_EQ(std::memcmp(got.f32(), want.f32(), 4 * got.numel()), 0)
            << op_kind_name(op.kind) << " over " << box.to_string();
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 60 * 3 * 3);
  // The forms with a value per channel: the forward mul and add, the mul's input gradient.
  EXPECT_GT(kernels::channel_affine_calls() - before, 60 * 3 * 2);
}

}  // namespace
}  // namespace heddle
