// kernels::writes_in_place: which inputs a lone elementwise call may overwrite with its result
// (the executor then gives the result that input's tile). Every kind it accepts, run by the fast
// kernel with its result written over the input it names (random shapes, sub-boxes, broadcast
// other operands, 1-2 threads), equals the same kernel writing a tile of its own, bitwise; the
// forms whose elements another point reads, or whose loops copy, are refused.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

using testing::uniform;

// The op of `g` that defines `v`.
const Op& def(const Graph& g, ValueId v) { return g.op(g.value(v).producer); }

// Runs `op` over `box` twice with the fast kernels: into a tile of its own, and with its result
// written over a copy of input `k`'s tile; expects the same bits.
void expect_same_in_place(const Graph& g, const Op& op, const Box& box, size_t k, std::mt19937& rng,
                          int threads) {
  std::vector<Tensor> tiles;
  for (const auto& x : op.inputs) {
    Tensor full = testing::random_tensor(g.type(x.value), rng, 0.25, 2.0);
    tiles.push_back(full.crop(x.proj.image(box)));
  }
  kernels::KernelOptions o;
  o.threads = threads;
  o.grain = 1;
  std::vector<const Tensor*> ins;
  for (const Tensor& t : tiles) ins.push_back(&t);
  Tensor own = Tensor::tile(DType::kF32, op.results[0].proj.image(box));
  ASSERT_TRUE(kernels::run(op, box, ins, {&own}, o).ok());
  Tensor shared(tiles[k]);  // an owning copy, read and overwritten by the call
  ASSERT_EQ(shared.region(), own.region());
  for (size_t i = 0; i < ins.size(); ++i)
    if (op.inputs[i].value == op.inputs[k].value) ins[i] = &shared;
  ASSERT_TRUE(kernels::run(op, box, ins, {&shared}, o).ok());
  EXPECT_TRUE(shared == own) << op_kind_name(op.kind) << " over input " << k;
}

TEST(InPlaceKernels, EveryAcceptedKindWritesOverItsInputAsIntoItsOwnTile) {
  std::mt19937 rng(44);
  const OpKind unary[] = {
      OpKind::kRelu,   OpKind::kGelu,       OpKind::kGeluTanh, OpKind::kSilu,
      OpKind::kTanh,   OpKind::kExp,        OpKind::kSigmoid,  OpKind::kLog,
      OpKind::kSqrt,   OpKind::kRsqrt,      OpKind::kNeg,      OpKind::kAbs,
      OpKind::kSquare, OpKind::kReciprocal, OpKind::kScale,    OpKind::kIdentity};
  const OpKind binary[] = {OpKind::kAdd,     OpKind::kSub,     OpKind::kMul, OpKind::kDiv,
                           OpKind::kMaximum, OpKind::kMinimum, OpKind::kPow};
  int64_t checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t rank = uniform(rng, 1, 3);
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(uniform(rng, 1, d + 1 == rank ? 300 : 6));
    Graph g;
    Ops ops(g);
    auto un = [&](OpKind k, ValueId v) {
      return k == OpKind::kScale ? ops.scale(v, 0.75) : ops.unary(k, v);
    };
    const ValueId x = ops.param("x", f32(shape));
    ValueId y;
    const int64_t form = trial % 3;
    if (form == 0) {  // unary
      y = un(unary[trial / 3 % std::size(unary)], x);
    } else if (form == 1) {  // binary, the other operand whole or a broadcast last dim
      const bool broadcast = uniform(rng, 0, 2) == 0;
      const ValueId z = ops.param("z", f32(broadcast ? std::vector<int64_t>{shape.back()} : shape));
      y = uniform(rng, 0, 1) ? ops.binary(binary[trial / 3 % std::size(binary)], x, z)
                             : ops.binary(binary[trial / 3 % std::size(binary)], z, x);
    } else {  // a unary op's gradient dy * f'(x), as autodiff makes it
      std::vector<int64_t> all(static_cast<size_t>(rank));
      for (int64_t d = 0; d < rank; ++d) all[static_cast<size_t>(d)] = d;
      const ValueId loss = ops.reduce(OpKind::kReduceSum, un(unary[trial / 3 % 7], x), all);
      auto grads = build_gradients(g, loss);
      ASSERT_TRUE(grads.ok()) << grads.error().to_string();
      g = std::move(grads->graph);
      y = grads->grads[0].second;
    }
    ASSERT_TRUE(ops.ok() || form == 2) << ops.status().error().message;
    // The elementwise op that computes y (for a gradient: the last elementwise_grad).
    const Op* op = &def(g, y);
    if (form == 2)
      for (const Op& o : g.ops())
        if (o.kind == OpKind::kElementwiseGrad) op = &o;
    Box box = op->space.box();
    if (trial % 4 == 3) box = testing::random_sub_box(box, rng);
    const int threads = static_cast<int>(uniform(rng, 1, 2));
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + std::string(op_kind_name(op->kind)));
    for (size_t k = 0; k < op->inputs.size(); ++k) {
      const bool whole = op->inputs[k].proj.image(box) == op->results[0].proj.image(box);
      if (!kernels::writes_in_place(*op, k)) {
        // Refused only where the input is read at other coordinates (a broadcast operand).
        EXPECT_FALSE(whole && g.type(op->inputs[k].value).shape() == g.type(y).shape())
            << "input " << k << " refused";
        continue;
      }
      ASSERT_TRUE(whole);
      expect_same_in_place(g, *op, box, k, rng, threads);
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(InPlaceKernels, FormsThatCopyOrReadOtherPointsAreRefused) {
  Graph g;
  Ops ops(g);
  const ValueId x = ops.param("x", f32({4, 8})), b = ops.param("b", f32({8}));
  const ValueId s = ops.add(x, b), t = ops.transpose(x, {1, 0});
  const ValueId m = ops.causal_mask(ops.param("q", f32({8, 8})));
  const ValueId sm = ops.softmax(x), r = ops.reduce(OpKind::kReduceSum, x, {1});
  const ValueId e = ops.einsum("ij,kj->ik", x, x);
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  EXPECT_TRUE(kernels::writes_in_place(def(g, s), 0));   // x + b over x
  EXPECT_FALSE(kernels::writes_in_place(def(g, s), 1));  // b is read by every row
  EXPECT_FALSE(kernels::writes_in_place(def(g, s), 2));  // no such input
  EXPECT_FALSE(kernels::writes_in_place(def(g, t), 0));  // another point's element
  EXPECT_FALSE(kernels::writes_in_place(def(g, m), 0));  // copies its visible prefix
  EXPECT_FALSE(kernels::writes_in_place(def(g, sm), 0));
  EXPECT_FALSE(kernels::writes_in_place(def(g, r), 0));
  EXPECT_FALSE(kernels::writes_in_place(def(g, e), 0));
  // add's own gradient copies dy: refused; a unary op's gradient is not.
  const ValueId loss = ops.reduce(OpKind::kReduceSum, ops.gelu(ops.add(x, x)), {0, 1});
  auto grads = build_gradients(g, loss);
  ASSERT_TRUE(grads.ok()) << grads.error().to_string();
  int64_t unary_grads = 0;
  for (const Op& op : grads->graph.ops()) {
    if (op.kind != OpKind::kElementwiseGrad) continue;
    const std::string fn = std::get<std::string>(op.attrs.at("fn"));
    const bool of_unary = op_kind_info(*parse_op_kind(fn)).category == OpCategory::kUnary;
    unary_grads += of_unary;
    EXPECT_EQ(kernels::writes_in_place(op, 0), of_unary);
  }
  EXPECT_GT(unary_grads, 0);
}

}  // namespace
}  // namespace heddle
