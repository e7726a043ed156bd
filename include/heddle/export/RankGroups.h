// Which ranks form each tensor-, pipeline-, data- and expert-parallel group of a strategy: the
// layout Megatron-LM (order tp-cp-ep-dp-pp) and torchtitan (mesh pp, dp, cp, tp) use, tensor
// parallelism innermost so that its groups share a node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heddle/sharding/StrategySpec.h"

namespace heddle::exporting {

/// Per parallel dimension (`tp`, `dp`, `pp`, `ep`, `cp`, of degree > 1), its groups of ranks,
/// each in rank order, groups ordered by their first rank. Ranks follow StrategySpec::mesh():
/// axes pp, dp, ep, cp, tp from outermost to innermost. With per-stage sub-meshes of different
/// shapes
/// (`meshes=`), stage s holds the next dp_s x tp_s ranks: `stages` lists each stage's ranks,
/// `tp` and `dp` the groups inside each stage (there are no pipeline groups of equal width).
std::map<std::string, std::vector<std::vector<int64_t>>> rank_groups(const StrategySpec& spec);

}  // namespace heddle::exporting
