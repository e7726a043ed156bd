// Causal load balancing for context parallelism: the zigzag layout of a run. The sequence is
// split into 2cp chunks and the cp group's device i holds chunks i and 2cp-1-i, so under a causal
// mask every device does the same attention work. A run executes the graph on the sequence
// permuted into that order (ir/Zigzag.h): the edge tensors (inputs, parameters, outputs) are
// permuted at the data edges, the ops that read positions carry the order in their `zigzag`
// attribute, and everything else is unchanged, derived from the graph (docs/sharding.md,
// "Causal load balancing").
#pragma once

#include <map>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/runtime/Executor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Which dims of a graph's edge tensors hold the token sequence, and the zigzag order they are
/// laid out in while a run executes.
struct SequenceLayout {
  int64_t chunks = 0;  ///< the chunk count, 2cp; 0 (default): in order
  int64_t extent = 0;  ///< the sequence length the chunks split
  /// Per input, parameter or output of the graph with sequence dims: those dims.
  std::map<ValueId, std::vector<int64_t>> dims;
  /// The ops whose result depends on positions (causal masks, rotary embeddings and their
  /// gradients): they get the `zigzag` attribute.
  std::vector<OpId> positional;
  /// True when the layout permutes nothing.
  bool in_order() const { return chunks <= 1; }
};

/// The zigzag layout of `g` for a cp group of `cp` devices. The sequence dims are dim 1 of the
/// graph inputs of rank >= 2 (the dims `cp` splits) and every tensor dim tied to them through an
/// op's index dim (a projection row reading that index dim alone, with coefficient 1, no offset
/// and a unit window, over the whole extent), or through the row of a normalization's window
/// (softmax, layernorm: the same permutation in and out). A diagnostic naming the op when the
/// graph cannot run permuted: an op reads a sequence dim otherwise (a shift, a window, a dim
/// merged with another, a slice), depends on the tokens' order (topk_gating), or masks or rotates
/// by positions of which only some are the sequence; or when 2cp does not divide the sequence.
/// Precondition: cp >= 2; `g` passed verify().
Result<SequenceLayout> zigzag_layout(const Graph& g, int64_t cp);

/// A copy of `g` whose positional ops carry the layout's order (the `zigzag` attribute); `g`
/// itself when the layout is in order.
Graph with_layout(const Graph& g, const SequenceLayout& layout);

/// `t` (a whole tensor) with dim `dim` permuted from the sequence's order into zigzag order over
/// `chunks` chunks (`back`: the inverse). Precondition: chunks divides the dim's extent.
Tensor permute_sequence(const Tensor& t, int64_t dim, int64_t chunks, bool back = false);

/// Every whole tensor of `m` the layout names, permuted into its order (`back`: back into the
/// sequence's order); the others are left alone.
void permute_sequences(TensorMap& m, const SequenceLayout& layout, bool back = false);

}  // namespace heddle
