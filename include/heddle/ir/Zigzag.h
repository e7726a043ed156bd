// The zigzag order of a sequence dim: causal load balancing for context parallelism splits the
// sequence into 2N chunks and gives device i of N chunks i and 2N-1-i, so a tensor laid out for
// it holds the chunks in the order 0, 2N-1, 1, 2N-2, ... (docs/sharding.md, "Causal load
// balancing"). Ops whose result depends on a token's position (the causal mask, rotary
// embeddings) read the order from their `zigzag` attribute.
#pragma once

#include <cstdint>

namespace heddle {

/// The attribute (int: the chunk count, even) saying an op's sequence coordinates are in zigzag
/// order; absent or 0: in order.
inline constexpr const char* kZigzagAttr = "zigzag";

/// The sequence position held at coordinate `x` (0 <= x < extent) of a dim of `extent` laid out
/// in zigzag order over `chunks` chunks; `x` itself when chunks <= 1. Precondition: chunks is
/// even and divides extent.
int64_t zigzag_position(int64_t x, int64_t extent, int64_t chunks);

/// The coordinate holding sequence position `pos`: the inverse of zigzag_position().
int64_t zigzag_coordinate(int64_t pos, int64_t extent, int64_t chunks);

}  // namespace heddle
