// Private: the per-op gradient rules of autodiff.
#pragma once

#include <vector>

#include "heddle/ops/Ops.h"
#include "heddle/support/Result.h"

namespace heddle::grad_detail {

/// The gradient contributions of op `id` of `ops.graph()` given the gradient `dy` of its first
/// result: one entry per input (kNoValue where no gradient flows, and for every input i with
/// `wanted[i]` false, for which no op is emitted: a gradient nobody reads is not computed).
/// `wanted` has one entry per input.
Result<std::vector<ValueId>> op_gradients(Ops& ops, OpId id, ValueId dy,
                                          const std::vector<bool>& wanted);

}  // namespace heddle::grad_detail
