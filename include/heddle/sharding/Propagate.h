// Propagation: completing a partial sharding deterministically. Users pin placements of inputs
// and parameters, strategies of ops, and which index dims each mesh axis may split; propagation
// walks the graph in order and gives every other op the strategy of least estimated cost
// (reshards of its inputs, its compute, and settling partial results), reporting every reshard it
// had to insert.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "heddle/sharding/CommCost.h"
#include "heddle/sharding/ShardingPlan.h"

namespace heddle {

/// Which index dims a mesh axis may split.
enum class AxisRole : uint8_t {
  kAny,              ///< any dim
  kBatch,            ///< only dims derived from the batch dim of the graph inputs (data parallel)
  kModel,            ///< only dims derived from neither batch nor sequence (tensor parallel)
  kModelOrSequence,  ///< model dims, and sequence dims outside contractions (sequence parallel)
  kBatchOrExpert,    ///< batch dims, and expert dims (expert parallel, GShard style)
  kSequence,         ///< only dims derived from the sequence dim of the inputs (context parallel)
};

/// What the user fixed.
struct Pins {
  std::map<ValueId, TensorSharding> values;  ///< starting placements of inputs and parameters
  std::map<OpId, OpStrategy> ops;            ///< fixed op strategies
  std::vector<AxisRole> axis_roles;          ///< per mesh axis; empty: every axis kAny
  /// Parameters standing for activations (a pipeline stage's received values and their
  /// gradients): their dims are labelled as a graph input's are. Default none.
  std::set<ValueId> activation_params;
  /// Declarative tactics (UserTactics.h), per mesh axis: the placement a value must have there
  /// (its producer keeps only strategies that give it; an input or parameter starts there,
  /// elsewhere as `values` says or replicated), and the index dim an op splits there (-1: none).
  /// On an axis a tactic names, strategies may split the dims its shards reach through the
  /// projections, whatever the axis role. Default none.
  std::map<ValueId, std::map<int64_t, Placement>> value_axes;
  std::map<OpId, std::map<int64_t, int64_t>> op_axes;
};

/// Options of propagate(). The defaults describe a nominal device (100 GFLOP/s, 10 GB/s links)
/// until the cost model supplies real figures.
struct PropagateOptions {
  double seconds_per_flop = 1e-11;  ///< compute time per FLOP on one device
  double seconds_per_byte = 1e-10;  ///< time per byte of BytesMovedCost traffic; not applied to a
                                    ///< `cost` that is in seconds (CommCost::in_seconds)
  const CommCost* cost = nullptr;   ///< null: BytesMovedCost
  /// How derive_placements() checks shards; kEvery only to compare with the straightforward
  /// check (benchmarks, tests). Default ShardCheck::kDeciding.
  ShardCheck shard_check = ShardCheck::kDeciding;
};

/// A reshard propagation inserted: a consumer needed `value` in another placement.
struct Reshard {
  ValueId value = -1;
  OpId consumer = -1;
  TensorSharding from, to;
  double seconds = 0;
};

/// The completed plan and what it costs in data movement.
struct Propagation {
  ShardingPlan plan;
  std::vector<Reshard> reshards;

  /// One line per reshard: `%x: [Shard(0)] -> [Replicate] for op 'einsum' defining %h (1.2 us)`.
  std::string report(const Graph& g) const;
};

/// Per value and tensor dim: derived from the batch dim (dim 0) of a graph input, from the
/// sequence dim (dim 1 of inputs of rank >= 2), from the expert dim (dim 0 of stacked expert
/// parameters, those of rank >= 3), or none. Labels flow forward through projections.
struct DimLabels {
  std::vector<std::vector<bool>> batch, sequence, expert;  ///< [value][dim]
};

/// Labels batch and sequence dims of every value of `g`; the parameters in `as_inputs` are
/// labelled as graph inputs (and never as stacked experts).
DimLabels label_dims(const Graph& g, const std::set<ValueId>& as_inputs = {});

/// How many times faster strategy `s` computes op `space` than one device: per split index dim,
/// its extent over the largest block (the number of devices when they divide it; fewer when
/// blocks are uneven: 4 heads on 6 devices run in one head's time, 4 times faster).
double parallelism(const IndexSpace& space, const Mesh& mesh, const OpStrategy& s);

/// Whether strategy `s` of op `id` splits only index dims the pinned axis roles allow.
bool strategy_allowed(const Graph& g, OpId id, const Mesh& mesh, const Pins& pins,
                      const DimLabels& labels, const OpStrategy& s);

/// The choices `pins` leave each op, as propagate() and the intra-op search both honour them:
/// the axis roles (strategy_allowed), except on an axis a tactic decides for the op or whose
/// tactic shards reach the dim through the projections; the op's pinned axes; its results'
/// pinned placements. Precondition: `g` passed verify(); `g`, `mesh` and `pins` outlive it.
class PinnedChoices {
 public:
  PinnedChoices(const Graph& g, const Mesh& mesh, const Pins& pins);
  /// Whether op `id` may take strategy `s`: the roles and the op's tactics (its results' pins
  /// are judged on the placements, by results_agree()).
  bool allowed(OpId id, const OpStrategy& s) const;
  /// Whether placements `p` of op `id` give its results the placements tactics pin.
  bool results_agree(OpId id, const StrategyPlacements& p) const;
  /// Whether a tactic pins op `id` or one of its results: then no strategy satisfying them is
  /// the diagnostic unsatisfiable(), not a fallback to replicated compute.
  bool constrained(OpId id) const;
  /// The diagnostic for a constrained op no strategy satisfies.
  Diagnostic unsatisfiable(OpId id) const;
  /// Where inputs and parameters start: `pins.values`, with their tactics' axes over them
  /// (other axes replicated).
  std::map<ValueId, TensorSharding> starts() const;

 private:
  const Graph& g_;
  const Mesh& mesh_;
  const Pins& pins_;
  DimLabels labels_;
  std::vector<std::vector<std::vector<bool>>> tactic_dims_;  ///< [axis][value][tensor dim]
};

/// Completes `pins` into a plan for `g` on `mesh`. A pin that does not fit (an op strategy its
/// op cannot take, a placement of the wrong rank, tactics no strategy of an op satisfies) is a
/// diagnostic; an op with no strategy its axis roles allow falls back to replicated compute
/// (split_report() says why). Precondition: `g` passed verify().
Result<Propagation> propagate(const Graph& g, const Mesh& mesh, const Pins& pins,
                              const PropagateOptions& options = {});

}  // namespace heddle
