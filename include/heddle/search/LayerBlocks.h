// Finding repeated identical layers in a graph by a structural hash of each op (kind, index
// space, attributes, operand projections and types, and how far back each operand was made), so
// the intra-op search solves one layer for all of them.
#pragma once

#include <cstdint>

#include "heddle/ir/Graph.h"

namespace heddle::search {

/// `count` consecutive runs of `length` ops starting at op `start`, op for op alike.
struct RepeatedBlocks {
  int64_t start = 0, length = 0, count = 0;  ///< count 0: no repetition found
  /// The block of op `id`: 0..count-1, -1 before the blocks, `count` after them.
  int64_t block_of(int64_t id) const;
  bool operator==(const RepeatedBlocks&) const = default;
};

/// The repetition covering the most ops (ties: the shortest block, then the earliest start),
/// at least two blocks of at least two ops; none found gives count 0. Two blocks are alike when
/// every op has the same structural hash as its counterpart: kind, attributes, index space,
/// operand projections and types, parameters by type, and operands made by ops as the distance
/// back to their producer. Deterministic. Precondition: verified graph.
RepeatedBlocks find_repeated_blocks(const Graph& g);

}  // namespace heddle::search
