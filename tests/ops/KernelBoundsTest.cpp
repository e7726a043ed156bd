// "Kernels assert it in debug builds": at dispatch, a kernel whose box would read an input
// outside the tensor it is given stops with an internal error (exit 2) instead of reading
// out of bounds. The check is compiled only without NDEBUG.
#include <gtest/gtest.h>

#include "heddle/ir/TextParser.h"
#include "heddle/ops/Kernel.h"

namespace heddle {
namespace {

TEST(KernelBounds, ABoxReadingOutsideItsTensorTripsTheDispatchCheck) {
#ifdef NDEBUG
  GTEST_SKIP() << "the dispatch check is compiled only in debug builds (NDEBUG unset)";
#else
  auto g = parse_graph(R"(graph g {
  input %x: f32[8]
  %y: f32[6] = reduce_sum [i=6, t=3:sum] %x(i + t) -> (i)
  output %y
})");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  const Op& op = g->op(0);
  Tensor y(g->type(g->outputs()[0]));
  Tensor whole(g->type(g->inputs()[0]));
  // The whole box reads x[0, 8): inside. A deliberately short tile of x (7 elements) is not.
  EXPECT_TRUE(kernels::run(op, op.space.box(), {&whole}, {&y}).ok());
  Tensor short_x(DType::kF32, IVec({7}));
  EXPECT_DEATH((void)kernels::run(op, op.space.box(), {&short_x}, {&y}),
               "reduce_sum over .* reads input 0 at .*, outside its tensor");
#endif
}

}  // namespace
}  // namespace heddle
