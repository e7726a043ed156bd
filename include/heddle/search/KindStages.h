// Pipelines on a mixed cluster whose stages follow its device kinds (Metis, ATC'24; HexiScale):
// each kind's devices split into its own number of equal stages with its own tensor-parallel
// width, hence its own data-parallel width and batch share per replica; the layers then split
// by each stage's speed.
#pragma once

#include <vector>

#include "heddle/cost/Simulator.h"

namespace heddle::search {

/// Options of kind_stage_candidates().
struct KindStageOptions {
  /// At most this many candidates, in enumeration order (fewer stages first); default 256.
  int64_t max_candidates = 256;
};

/// For a configuration `base` simulated on the mixed cluster `cluster` (a model with layers that
/// rebuilds its batch, no ep), every `meshes=` strategy whose stages follow the kinds: kind k's
/// n_k devices as s_k >= 1 equal stages of dp_k x tp_k (tp_k at most the kind's node and
/// dividing n_k / s_k, dp_k = n_k / (s_k tp_k) dividing the sequences of one micro-batch), the
/// stages in kind order, as many as there are layer units at most; the base's micro-batch count,
/// ZeRO stage, recomputation and techniques; schedule zb-h1 when training (1f1b otherwise); even
/// layer splits (the caller balances them on the simulated chunk costs). Empty for a one-kind
/// cluster or a base that does not qualify. Deterministic.
std::vector<StrategySpec> kind_stage_candidates(const model::ScalableModel& model,
                                                const cost::Cluster& cluster,
                                                const StrategySpec& base,
                                                const cost::SimulationResult& base_sim, bool train,
                                                const KindStageOptions& options = {});

}  // namespace heddle::search
