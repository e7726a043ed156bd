#include "heddle/ir/TensorType.h"

#include "heddle/support/Assert.h"
#include "heddle/support/Hash.h"

namespace heddle {

TensorType::TensorType(DType dtype, IVec shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) HEDDLE_ASSERT(d >= 0) << "negative dim in shape " << shape_.to_string();
}

int64_t TensorType::bytes() const { return numel() * dtype_bytes(dtype_); }

std::string TensorType::to_string() const {
  return std::string(dtype_name(dtype_)) + shape_.to_string();
}

size_t TensorType::hash() const {
  size_t h = shape_.hash();
  hash_combine(h, static_cast<int>(dtype_));
  return h;
}

}  // namespace heddle
