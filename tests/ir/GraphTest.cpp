// Graph tables never move: references taken before appends stay valid after thousands of them
// (a builder holds its operands' types while it emits; issue #20).
#include <gtest/gtest.h>

#include "heddle/ir/Graph.h"

namespace heddle {
namespace {

TEST(Graph, ReferencesSurviveAppends) {
  Graph g;
  ValueId x = g.add_input("x", TensorType(DType::kF32, IVec{4, 8}));
  const TensorType& t = g.type(x);
  const Value& v = g.value(x);
  Op first;
  first.kind = OpKind::kRelu;
  first.space = IndexSpace({{"i", 4, std::nullopt}, {"j", 8, std::nullopt}});
  first.inputs = {{x, IndexProjection(AffineMap::identity(2)), false}};
  first.results = {{-1, IndexProjection(AffineMap::identity(2)), false}};
  g.add_op(first, {"y0"}, {t});
  const Op& op0 = g.op(0);
  const IVec* shape = &t.shape();
  for (int i = 1; i < 5000; ++i) {
    Op o = first;
    o.inputs[0].value = static_cast<ValueId>(g.num_values() - 1);
    g.add_op(std::move(o), {"y" + std::to_string(i)}, {t});  // `t` is read while appending
  }
  EXPECT_EQ(&g.type(x), &t);
  EXPECT_EQ(&g.value(x), &v);
  EXPECT_EQ(&g.op(0), &op0);
  EXPECT_EQ(&t.shape(), shape);
  EXPECT_EQ(t.to_string(), "f32[4, 8]");
  EXPECT_EQ(op0.kind, OpKind::kRelu);
  EXPECT_EQ(g.num_ops(), 5000);
  Graph moved = std::move(g);  // moving the graph keeps its elements in place too
  EXPECT_EQ(&moved.type(x), &t);
}

}  // namespace
}  // namespace heddle
