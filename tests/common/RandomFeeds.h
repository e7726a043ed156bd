// Random whole tensors for every graph input and parameter, for tests that compare partitioned
// execution with single-device execution: floats uniform in [-1, 1), integers in [0, 3).
#pragma once

#include <random>

#include "heddle/runtime/Executor.h"

namespace heddle::testing {

/// One tensor per input and parameter of `g`, seeded.
inline TensorMap random_feeds(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  TensorMap feeds;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      Tensor t(g.type(v));
      if (t.is_int()) {
        for (int64_t i = 0; i < t.numel(); ++i) t.i64()[i] = static_cast<int64_t>(rng() % 3);
      } else {
        for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
      }
      feeds.emplace(v, std::move(t));
    }
  return feeds;
}

}  // namespace heddle::testing
