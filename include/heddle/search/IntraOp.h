// Alpa's intra-op search: one strategy per op chosen jointly by an integer linear program whose
// objective is compute plus resharding time, under a per-device memory limit. The problem is
// stated as a strategy graph (costs per choice and per edge), built from a sharded graph.
#pragma once

#include <limits>
#include <vector>

#include "heddle/cost/Cluster.h"
#include "heddle/search/IlpSolver.h"
#include "heddle/sharding/Propagate.h"

namespace heddle::search {

/// Nodes choose one strategy each; edges charge for the pair of choices at their ends.
struct StrategyGraph {
  struct Node {
    std::vector<double> cost;    ///< per choice: seconds
    std::vector<double> memory;  ///< per choice: bytes per device
  };
  struct Edge {
    int from = 0, to = 0;
    std::vector<double> cost;  ///< row-major [choice of from][choice of to]: seconds; >= 1e30
                               ///< forbids the pair
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  double memory_limit = std::numeric_limits<double>::infinity();  ///< bytes per device

  /// Total cost and memory of a full assignment. Precondition: one valid choice per node.
  std::pair<double, double> evaluate(const std::vector<int>& choice) const;
};

/// A chosen assignment.
struct StrategyChoice {
  std::vector<int> choice;  ///< per node
  double cost = 0;          ///< seconds
  double memory = 0;        ///< bytes per device
  bool optimal = false;     ///< proven by the solver
};

/// Solves the strategy graph as Alpa's ILP: one-hot choice variables per node, edge variables
/// e[s,t] tied to their ends by sum_t e[s,t] = x_from[s] and sum_s e[s,t] = x_to[t], the memory
/// constraint sum memory * x <= limit. No assignment within the limit is a diagnostic saying the
/// smallest memory any assignment needs.
Result<StrategyChoice> solve_strategy_graph(const StrategyGraph& sg, const IlpSolver& solver,
                                            const IlpOptions& options = {});

/// Options of plan_intra_op().
struct IntraOpOptions {
  double seconds_per_flop = 1e-11;  ///< compute time per FLOP on one device (default 100 GFLOP/s)
  double seconds_per_byte = 1e-10;  ///< time per byte of communication (default 10 GB/s); not
                                    ///< applied to a `cost` in seconds (CommCost::in_seconds)
  const CommCost* cost = nullptr;   ///< prices reshards; null: BytesMovedCost
  /// Non-null: price with the cost model instead of the three fields above: compute from the
  /// roofline of each op's local box on the cluster's device, reshards from alpha-beta times on
  /// the link of each mesh axis (in the device's element size). Default null.
  const cost::Cluster* cluster = nullptr;
  bool train = false;  ///< with `cluster`: charge backward (2x compute, the reshards again) and the
                       ///< gradient all-reduce of each parameter over the axes it is replicated
                       ///< on while its op is split; default false
  int64_t micro_batches = 1;  ///< with `train`: micro-batches per gradient all-reduce; default 1
  double memory_limit_bytes = std::numeric_limits<double>::infinity();  ///< per device
  bool merge_followers = true;  ///< elementwise and layout ops with one operand made by an op in
                                ///< the same layer follow that producer's choice; default true
  bool fold_layers = true;      ///< repeated identical layers (find_repeated_blocks) share one
                                ///< set of choices; default true
  double layer_scale = 1;  ///< with fold_layers: the model holds this many times the layers the
                           ///< graph shows (a 2-layer graph standing for 96 layers: 48); the
                           ///< repeated layers' costs and memory are counted as often; default 1
  IlpOptions ilp;          ///< solver options
};

/// The plan, its estimated time and memory, and the problem size.
struct IntraOpPlan {
  ShardingPlan plan;
  double seconds = 0;       ///< compute + resharding estimate (times layer_scale for the layers)
  double memory_bytes = 0;  ///< per device: parameters, results, as the ILP counts them
  bool optimal = false;
  int64_t variables = 0;                    ///< ILP columns
  int64_t nodes = 0;                        ///< ILP nodes (choices made) after merging and folding
  int64_t layer_blocks = 0, layer_ops = 0;  ///< repeated layers found and ops in each
};

/// Chooses every op's strategy jointly for `g` on `mesh`, honouring `pins` (fixed op strategies,
/// starting placements, axis roles). Memory per device counts each parameter's and each result's
/// local bytes under the chosen placements (no liveness reuse: an upper bound). Merging and
/// folding (on by default) make the problem smaller; the plan then is optimal among plans where
/// followers answer their producers cheapest and repeated layers agree. Deterministic.
/// Precondition: `g` passed verify().
Result<IntraOpPlan> plan_intra_op(const Graph& g, const Mesh& mesh, const Pins& pins,
                                  const IlpSolver& solver, const IntraOpOptions& options = {});

}  // namespace heddle::search
