// Causal block skipping for ring attention: which blocks of a ring's consuming op the causal mask
// hides entirely, so the block kernel need not run (docs/sharding.md, "Ring attention").
#pragma once

#include <optional>

#include "heddle/ir/Graph.h"

namespace heddle {

/// How a causal mask hides whole blocks of an op: every index point whose image in operand
/// `operand` (a result when `result`, else an input) has key coordinate (its tensor's last dim)
/// greater than query coordinate (the dim before it) plus `shift` computes nothing the step keeps.
struct CausalBlocks {
  bool result = false;  ///< `operand` indexes the op's results (true) or its inputs
  int32_t operand = -1;
  int64_t shift = 0;  ///< the key dim's extent minus the query dim's (keys aligned at the end)
};

/// For op `id` whose input `ring_input` arrives block by block around a ring, the causal mask
/// that makes some blocks dead, derived from the graph:
/// - the blocks write scores that reach a causal_mask only through unary elementwise ops on the
///   same coordinates, and nothing else reads those scores' values where the mask hides them
///   (the gradients of `scale` and `causal_mask` read dy only): hidden scores are never used;
/// - or the op reduces over the ring's blocks and its other input is the softmax over the last
///   dim of a causal_mask's result: where the mask hides it that input is exactly zero, so
///   the block adds nothing.
/// nullopt when neither holds (the blocks then all run).
std::optional<CausalBlocks> causal_blocks(const Graph& g, OpId id, size_t ring_input, bool reduce);

/// True when `c` says the index box `box` of `op` is hidden entirely.
bool hides(const CausalBlocks& c, const Op& op, const Box& box);

}  // namespace heddle
