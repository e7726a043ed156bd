// Tile-wise parameter and input generation equals cropping the whole tensor, bit for bit, for
// every tile of a split and for ragged boxes; so ranks can materialise only their shards.
#include <gtest/gtest.h>

#include "heddle/ops/Interpreter.h"
#include "heddle/ops/TileInit.h"

namespace heddle {
namespace {

TEST(TileInit, ParamTilesEqualCropsOfTheWholeParam) {
  TensorType type(DType::kF32, IVec{6, 10});
  Tensor whole = init_param("layer0.w", type, 7);
  Box full = Box::of_shape(type.shape());
  for (int64_t dim = 0; dim < 2; ++dim)
    for (const Box& b : full.split(dim, 2)) {
      EXPECT_EQ(init_param_tile("layer0.w", type, 7, b), whole.crop(b)) << b.to_string();
    }
  Box ragged(IVec{1, 3}, IVec{5, 4});
  EXPECT_EQ(init_param_tile("layer0.w", type, 7, ragged), whole.crop(ragged));
  // The seed and the name both matter.
  EXPECT_FALSE(init_param_tile("layer0.w", type, 8, ragged) == whole.crop(ragged));
  EXPECT_FALSE(init_param_tile("layer1.w", type, 7, ragged) == whole.crop(ragged));
}

TEST(TileInit, ConvKernelAndConstantParamsTileToo) {
  TensorType conv(DType::kF32, IVec{4, 3, 3, 3});
  Box b(IVec{1, 0, 1, 0}, IVec{3, 3, 3, 2});
  EXPECT_EQ(init_param_tile("conv.w", conv, 1, b), init_param("conv.w", conv, 1).crop(b));
  TensorType vec(DType::kF32, IVec{8});
  Box half(IVec{4}, IVec{8});
  EXPECT_EQ(init_param_tile("ln.gamma", vec, 1, half), init_param("ln.gamma", vec, 1).crop(half));
  EXPECT_EQ(init_param_tile("ln.gamma", vec, 1, half).f32()[0], 1.0f);
}

TEST(TileInit, InputTilesEqualCropsOfTheWholeInput) {
  TensorType f(DType::kF32, IVec{4, 3, 5});
  Tensor whole = random_input_tile("x", f, 3, 0, Box::of_shape(f.shape()));
  Box b(IVec{2, 1, 0}, IVec{4, 3, 5});
  EXPECT_EQ(random_input_tile("x", f, 3, 0, b), whole.crop(b));
  TensorType ids(DType::kI64, IVec{8, 16});
  Tensor all = random_input_tile("ids", ids, 3, 50, Box::of_shape(ids.shape()));
  for (const Box& t : Box::of_shape(ids.shape()).split(1, 4))
    EXPECT_EQ(random_input_tile("ids", ids, 3, 50, t), all.crop(t)) << t.to_string();
  for (int64_t i = 0; i < all.numel(); ++i) {
    EXPECT_GE(all.i64()[i], 0);
    EXPECT_LT(all.i64()[i], 50);
  }
}

TEST(TileInit, EmptyTileIsEmpty) {
  TensorType type(DType::kF32, IVec{4, 4});
  Box empty(IVec{2, 2}, IVec{2, 4});
  EXPECT_EQ(init_param_tile("w", type, 0, empty).numel(), 0);
}

}  // namespace
}  // namespace heddle
