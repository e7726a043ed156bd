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
  /// The mask's `zigzag` attribute: its query and key coordinates are in zigzag order over this
  /// many chunks (ir/Zigzag.h), compared as the positions they hold; 0 (default): in order.
  int64_t chunks = 0;
  int64_t extent = 0;  ///< the key dim's extent (the sequence the chunks split)
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

/// The part of index box `box` of `op` that `c` does not hide: empty when hides() says the
/// whole box is hidden. With zigzag chunks the box is cut at the chunk boundaries of its query
/// and key coordinates (half-blocks of a ring step) and the smallest box holding every piece
/// with a visible point is returned (the query and key dims must each be read by one index dim
/// with coefficient 1; otherwise the whole box, when any of it is visible).
Box visible_part(const CausalBlocks& c, const Op& op, const Box& box);

}  // namespace heddle
