// The spatial geometry of convolution and pooling ops, read from their attributes with the one set
// of defaults every reader uses (builders, verifier, autodiff, kernels): stride 1 (pooling: the
// kernel), padding 0, dilation 1, groups 1.
#pragma once

#include <array>
#include <cstdint>

#include "heddle/ir/Attribute.h"
#include "heddle/ir/OpKind.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Strides, padding, dilation (and the pooling kernel) of a 2-d windowed op. Pairs are (h, w).
struct WindowGeometry {
  std::array<int64_t, 2> kernel = {1, 1};  ///< pooling kinds only; a conv's comes from its weight
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 4> padding = {0, 0, 0, 0};  ///< top, left, bottom, right
  std::array<int64_t, 2> dilation = {1, 1};
  int64_t groups = 1;

  /// True when any padding entry is positive.
  bool padded() const { return padding[0] || padding[1] || padding[2] || padding[3]; }
  /// The attributes of `kind` spelling this geometry out in full (no attribute left to a
  /// default), as autodiff writes them on the gradient ops.
  Attrs to_attrs(OpKind kind) const;
};

/// True for conv2d, conv2d_grad_input and conv2d_grad_weight.
bool is_conv_kind(OpKind kind);
/// True for maxpool2d, avgpool2d and pool2d_grad.
bool is_pool_kind(OpKind kind);

/// The geometry of a conv or pooling op from `attrs`, absent attributes taking the defaults above.
/// Diagnostics (naming the attribute and the rule): a pair without 2 entries, padding without 2
/// or 4, a stride, dilation, kernel or group count below 1, a negative padding.
/// Precondition: is_conv_kind(kind) || is_pool_kind(kind).
Result<WindowGeometry> window_geometry(OpKind kind, const Attrs& attrs);

}  // namespace heddle
