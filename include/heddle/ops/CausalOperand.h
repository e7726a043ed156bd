// Which operand of a contraction a causal mask governs: the attention products whose result the
// mask hides in part (scores, their gradient dP) or whose input is zero where it hides (softmax
// probabilities, the masked scores' gradient), derived from the graph so a kernel can skip the
// blocks above the diagonal (ops/KernelContraction.cpp; docs/benchmarks.md, branch `gpt`).
#pragma once

#include <optional>

#include "heddle/ir/Graph.h"

namespace heddle::kernels {

/// A causal mask's hold on one operand of an op: at every element whose key coordinate (the
/// operand tensor's last dim) exceeds its query coordinate (the dim before) plus `shift`, the
/// operand is
/// - a result (`result`): an element nothing reads but through a causal mask (which replaces it)
///   or multiplied by an exact zero (softmax's gradient dy at a zero probability), so a kernel
///   may write any finite value there (the contraction writes 0 where it skips);
/// - an input: exactly zero, so a contraction summing over it may leave those terms out; or,
///   for a softmax, -inf (the mask's result), so each row weighs only its visible prefix.
struct CausalOperand {
  bool result = false;  ///< `operand` indexes the op's results (true) or its inputs
  int32_t operand = -1;
  int64_t shift = 0;  ///< the key dim's extent minus the query dim's (keys aligned at the end)
};

/// The causally masked operand of einsum op `id` of `g` (its result first, then its inputs), or
/// the input of a softmax over the last dim of a mask's result; nullopt when none is (or the mask
/// orders its coordinates in zigzag chunks, ir/Zigzag.h). The masks recognized are `causal_mask`
/// ops on the same coordinates as their input; between the product and the mask only `scale`
/// (forward) or `scale`'s gradient may stand, and a zero input is a softmax over the last dim of a
/// mask's result or a mask's gradient (optionally scaled).
std::optional<CausalOperand> causal_operand(const Graph& g, OpId id);

}  // namespace heddle::kernels
