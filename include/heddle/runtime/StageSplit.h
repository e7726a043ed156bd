// Splitting a graph into pipeline chunks: contiguous runs of ops, balanced by repeating layers the
// way the simulator balances them (layers / chunks each, the first chunks taking one more, the
// ops before the first layer on chunk 0 and those after the last on the last chunk).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/support/Result.h"

namespace heddle {

/// The layer a parameter belongs to, from its name: the first dot-separated component when it
/// is letters followed by digits (`h3.attn.w` -> `h3`, `layers12.mlp` -> `layers12`, `fc0.w` ->
/// `fc0`); empty for parameters outside layers (`wte`, `norm.gamma`).
std::string layer_of_param(const std::string& name);

/// The op index where each of `chunks` chunks starts, plus num_ops() at the end (size chunks+1,
/// non-decreasing, every chunk non-empty). Layers are found by parameter names
/// (layer_of_param): a layer starts at the first op reading one of its parameters. With at least
/// `chunks` layers, chunk c gets layers/chunks layers (+1 for c < layers % chunks); otherwise the
/// ops are split into runs of equal count. A graph with fewer ops than chunks is a diagnostic.
/// `units` non-empty (the strategy's `layers=a/b/..`): chunk c gets units[c] repeating units
/// instead, a unit being (layers found) / sum(units) consecutive layers (1, or 2 for a MoE
/// model's dense + expert pair); diagnostics: not one entry per chunk, an entry below 1, a sum
/// that does not divide the layers found. Precondition: chunks >= 1.
Result<std::vector<int64_t>> split_stages(const Graph& g, int64_t chunks,
                                          const std::vector<int64_t>& units = {});

}  // namespace heddle
