// Property tests of the per-channel affine loops (KernelChannelAffine.cpp): a mul or add of a
// value per channel on NCHW planes, either operand order, and the mul's gradients, on random
// shapes (dims of 1 included) and random sub-boxes over whole or cropped tiles, bitwise against
// the reference loops (one float operation per element, so the results agree exactly).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "OpsTestUtil.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Chain.h"
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

// A random NCHW activation x and per-channel s and t ([C, 1, 1]) as parameters of `ops`' graph
// (dims 1 to `hi`, channels 1 to 9).
struct Affine {
  int64_t N, C, H, W;
  ValueId x, s, t;
};
Affine affine_params(Ops& ops, std::mt19937& rng, int64_t hi) {
  Affine a{pick(rng, 1, 3), pick(rng, 1, 9), pick(rng, 1, hi), pick(rng, 1, hi), -1, -1, -1};
  a.x = ops.param("x", TensorType(DType::kF32, IVec{a.N, a.C, a.H, a.W}));
  a.s = ops.param("s", TensorType(DType::kF32, IVec{a.C, 1, 1}));
  a.t = ops.param("t", TensorType(DType::kF32, IVec{a.C, 1, 1}));
  return a;
}

TEST(ChannelAffine, PerChannelMulAddAndTheirGradientsEqualTheReferenceBitwise) {
  std::mt19937 rng(165);
  int64_t checked = 0;
  const int64_t before = kernels::channel_affine_calls();
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("affine");
    Ops ops(g);
    const auto [N, C, H, W, x, s, t] = affine_params(ops, rng, 6);
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

// Batch norm's scale and shift as one chain (x * s + t, either operand order, the product kept
// or a temporary), on random shapes and sub-boxes: the pair loop does the two float operations
// of the separate kernels, so the results are the same bits.
TEST(ChannelAffine, ScaleThenShiftChainsEqualTheSeparateKernelsBitwise) {
  std::mt19937 rng(166);
  const int64_t before = kernels::channel_affine_calls();
  int64_t checked = 0, planes = 0;
  for (int round = 0; round < 80; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("scale_shift");
    Ops ops(g);
    const auto [N, C, H, W, x, s, t] = affine_params(ops, rng, 6);
    const bool add_first = pick(rng, 0, 3) == 0;  // shift then scale, less common
    ValueId u = add_first ? ops.add(x, t) : pick(rng, 0, 1) ? ops.mul(x, s) : ops.mul(s, x);
    ValueId y = add_first ? ops.mul(u, s) : pick(rng, 0, 1) ? ops.add(u, t) : ops.add(t, u);
    ops.output(y);
    ASSERT_TRUE(ops.status().ok());
    std::map<ValueId, Tensor> in;
    for (ValueId v : {x, s, t}) in.emplace(v, testing::random_tensor(g.type(v), rng));
    const Box box = pick(rng, 0, 1) ? g.op(0).space.box() : sub_box(g.op(0).space.box(), rng);
    const bool keep = pick(rng, 0, 1);  // the first result read after the chain
    auto got = kernels::run_chain(g, {{0, box}, {1, box}},
                                  keep ? std::vector<ValueId>{} : std::vector<ValueId>{u},
                                  [&](ValueId v) { return &in.at(v); });
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    // The pair loop takes boxes whose rows over x's whole tile are whole planes.
    if (box.end()[3] - box.start()[3] == W || box.end()[2] - box.start()[2] == 1) ++planes;
    // The separate reference kernels, one after the other.
    kernels::KernelOptions ref;
    ref.reference = true;
    auto one = [&](OpId id, std::map<ValueId, Tensor>& vals) {
      const Op& op = g.op(id);
      std::vector<const Tensor*> ip;
      for (const auto& o : op.inputs) ip.push_back(&vals.at(o.value));
      Tensor out = Tensor::tile(DType::kF32, op.results[0].proj.image(box));
      EXPECT_TRUE(kernels::run(op, box, ip, {&out}, ref).ok());
      vals.insert_or_assign(op.results[0].value, std::move(out));
    };
    std::map<ValueId, Tensor> want = in;
    one(0, want);
    one(1, want);
    ASSERT_EQ(got->size(), keep ? 2u : 1u);
    for (const auto& [v, tile] : *got) {
      ASSERT_EQ(tile.region(), want.at(v).region());
      EXPECT_EQ(std::memcmp(tile.f32(), want.at(v).f32(), 4 * tile.numel()), 0)
          << g.value(v).name << " over " << box.to_string();
      ++checked;
    }
  }
  EXPECT_GE(checked, 80);
  EXPECT_GE(planes, 40);
  EXPECT_EQ(kernels::channel_affine_calls() - before, planes);  // those took the pair loop
}

// The per-channel sums of batch norm's backward (the shift's gradient: dy summed over N, H, W;
// the scale's: dy * x summed likewise) on random shapes and sub-boxes, against the reference's
// sums in double, and the same bits on one thread and two (the sums split by channels).
TEST(ChannelAffine, PerChannelSumsMatchTheReferenceAndRepeatOnThreads) {
  std::mt19937 rng(167);
  const int64_t before = kernels::channel_reduce_calls();
  int64_t checked = 0;
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Graph g("sums");
    Ops ops(g);
    const auto [N, C, H, W, x, s, t] = affine_params(ops, rng, 7);
    ValueId w = ops.param("w", TensorType(DType::kF32, IVec{N, C, H, W}));
    ops.output(ops.reduce(OpKind::kReduceSum, ops.mul(ops.add(ops.mul(x, s), t), w), {0, 1, 2, 3}));
    ASSERT_TRUE(ops.status().ok());
    auto grads = build_gradients(g, g.outputs()[0]);
    ASSERT_TRUE(grads.ok());
    const Graph& tg = grads->graph;
    for (const Op& op : tg.ops()) {
      if (!op.space.has_reduce() || op.space.rank() != 4 || op.space.dim(1).reduce) continue;
      std::vector<Tensor> in;
      for (const auto& v : op.inputs) in.push_back(testing::random_tensor(tg.type(v.value), rng));
      std::vector<const Tensor*> ip;
      for (const auto& tile : in) ip.push_back(&tile);
      const Box box = pick(rng, 0, 1) ? op.space.box() : sub_box(op.space.box(), rng);
      const Box image = op.results[0].proj.image(box);
      // The reference in double: each channel's terms and their magnitudes.
      Tensor want = Tensor::tile(DType::kF32, image);
      kernels::KernelOptions ref;
      ref.reference = true;
      ASSERT_TRUE(kernels::run(op, box, ip, {&want}, ref).ok());
      Tensor mag = Tensor::tile(DType::kF32, image);
      {
        std::vector<Tensor> abs_in;
        for (const auto& tile : in) {
          Tensor a = tile;
          for (int64_t i = 0; i < a.numel(); ++i) a.f32()[i] = std::fabs(a.f32()[i]);
          abs_in.push_back(std::move(a));
        }
        std::vector<const Tensor*> ap;
        for (const auto& tile : abs_in) ap.push_back(&tile);
        ASSERT_TRUE(kernels::run(op, box, ap, {&mag}, ref).ok());
      }
      Tensor first;
      for (int threads : {1, 2}) {
        Tensor got = Tensor::tile(DType::kF32, image);
        got.fill(1e6);
        kernels::KernelOptions ko;
        ko.threads = threads;
        ASSERT_TRUE(kernels::run(op, box, ip, {&got}, ko).ok());
        for (int64_t i = 0; i < got.numel(); ++i)
          EXPECT_LE(std::fabs(got.f32()[i] - want.f32()[i]), 1e-6f * (mag.f32()[i] + 1.0f))
              << op_kind_name(op.kind) << " over " << box.to_string() << " element " << i;
        if (threads == 1)
          first = got;
        else
          EXPECT_EQ(std::memcmp(got.f32(), first.f32(), 4 * got.numel()), 0) << "threads";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 60 * 2);  // the shift's and the scale's gradients
  EXPECT_GE(kernels::channel_reduce_calls() - before, 60 * 2);
}

}  // namespace
}  // namespace heddle
