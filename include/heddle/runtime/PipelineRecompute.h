// What a pipeline chunk's backward blocks recompute of its forward, per `recompute=`: nothing
// (none: the forward block stashes every activation the backward reads), attention's inner
// activations (selective, as Korthikanti et al. define it), or the whole chunk (full).
#pragma once

#include <cstdint>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/sharding/Recompute.h"

namespace heddle {

/// Per op of `g`'s first `forward_ops` ops (a chunk's forward, as the start of its backward
/// graph), true when the backward recomputes it rather than reading its results from the
/// forward block's stash. kNone: none; kFull: all; kSelective: the ops making attention scores
/// and probabilities, that is every softmax and the chain of ops of the softmax's shape feeding
/// it, back to and including the contraction that made the scores (QK^T, scale, causal mask,
/// softmax). Precondition: 0 <= forward_ops <= g.num_ops().
std::vector<bool> recomputed_forward_ops(const Graph& g, int64_t forward_ops, Recompute recompute);

}  // namespace heddle
