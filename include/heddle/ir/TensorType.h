// TensorType: element type plus static shape, e.g. `f32[64, 784]`. Shape only, never data.
#pragma once

#include <string>

#include "heddle/ir/DType.h"
#include "heddle/ir/IVec.h"

namespace heddle {

/// An immutable tensor type. Invariant: every dim >= 0.
class TensorType {
 public:
  TensorType() = default;
  /// Precondition: shape >= 0 in every dim.
  TensorType(DType dtype, IVec shape);

  DType dtype() const { return dtype_; }
  const IVec& shape() const { return shape_; }
  int64_t rank() const { return shape_.size(); }
  /// Number of elements (1 for a scalar).
  int64_t numel() const { return shape_.product(); }
  /// numel() * bytes per element.
  int64_t bytes() const;

  /// `f32[64, 784]`; a scalar is `f32[]`.
  std::string to_string() const;
  bool operator==(const TensorType&) const = default;
  size_t hash() const;

 private:
  DType dtype_ = DType::kF32;
  IVec shape_;
};

}  // namespace heddle

template <>
struct std::hash<heddle::TensorType> {
  size_t operator()(const heddle::TensorType& t) const { return t.hash(); }
};
