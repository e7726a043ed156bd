// ArenaPlan: static memory planning. Buffers with known lifetimes get offsets in one arena so that
// buffers alive at the same time never overlap, and the arena stays small (greedy best fit).
#pragma once

#include <cstdint>
#include <vector>

namespace heddle {

/// One buffer to place: alive from position `first` to position `last` inclusive, `bytes` long.
struct ArenaRequest {
  int64_t first = 0;
  int64_t last = 0;
  int64_t bytes = 0;
};

/// Where each request went, and the arena size that holds them all.
struct ArenaLayout {
  std::vector<int64_t> offsets;  ///< per request, in request order; multiples of the alignment
  int64_t bytes = 0;             ///< the arena size: the highest end of any placed buffer
};

/// Places `requests` in one arena: the largest first, each at the lowest offset of the smallest gap
/// between buffers whose lifetimes overlap its own that fits it (best fit), else above them.
/// Buffers alive at a common position never overlap. Offsets and sizes are rounded up to
/// `alignment` bytes (a power of two). Requests of 0 bytes get offset 0 and take no space.
ArenaLayout plan_arena(const std::vector<ArenaRequest>& requests, int64_t alignment = 64);

}  // namespace heddle
