// Tactics: the patterns people use, as pins for propagation. `dp` shards the batch of every
// input on the dp axis; `tp` lets the tp axis split only model dims, so propagation finds
// Megatron's column- then row-parallel pairs; `sp=on` also lets tp split sequence dims outside
// contractions; `zero` shards parameters (3) or optimizer updates (1, 2) over dp.
#pragma once

#include "heddle/sharding/Propagate.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle {

/// The pins `spec` means for `g` on `mesh` (whose axes are named as StrategySpec::mesh names
/// them). A batch the dp axis does not divide, or a parameter ZeRO-3 cannot shard, is a
/// diagnostic naming the tensor and the divisors that would work; so are a sequence the cp axis
/// does not divide and cp on a graph whose attention mixes no sequence. `activation_params`:
/// parameters standing for activations (a pipeline chunk's received values), whose dims are
/// labelled as a graph input's (Pins::activation_params; default none). Precondition: verified
/// graph.
Result<Pins> tactic_pins(const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                         const std::set<ValueId>& activation_params = {});

/// tactic_pins() followed by plan_from_pins(): the plan for a strategy string (when
/// StrategySpec::ring_cp(), cp > 1 without `cp_comm=allgather`, its ring_axis is the cp axis).
Result<Propagation> plan_from_strategy(const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                                       const PropagateOptions& options = {});

/// propagate() for the degrees the user asked for: a mesh axis of size > 1 that splits no op is
/// a diagnostic giving the real cause (split_report(): divisibility, with the divisors that
/// would work, or the projection form that refuses the split).
Result<Propagation> plan_from_pins(const Graph& g, const Mesh& mesh, const Pins& pins,
                                   const PropagateOptions& options = {});

}  // namespace heddle
