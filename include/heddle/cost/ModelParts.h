// ModelParts: the forward cost of a sharded model on its representative device (device 0 of a
// dp x tp mesh), split into the part before the repeating layers, one layer, and the part after,
// so that a 128-layer model is costed from a two-layer graph.
#pragma once

#include <vector>

#include "heddle/cost/Cluster.h"
#include "heddle/sharding/Propagate.h"

namespace heddle::cost {

/// Forward cost of a run of ops for one micro-batch on the representative device.
struct PartCost {
  double compute_s = 0;  ///< roofline time of the ops
  double comm_s = 0;     ///< alpha-beta time of the reshards the ops need
  double ep_comm_s = 0;  ///< the part of comm_s on an `ep` or `cp` mesh axis (expert/context)
  double dp_comm_s = 0;  ///< the part of comm_s on the `dp` axis (ZeRO-3 parameter gathers)
  /// The part of ep_comm_s on the `cp` axis: context parallelism's key/value exchange (forward)
  /// and the reduction of their gradients (backward), which ring attention overlaps with the
  /// block attention it feeds.
  double cp_comm_s = 0;
  double flops = 0;        ///< local FLOPs
  double comm_bytes = 0;   ///< bytes the device sends for those reshards
  double attention_s = 0;  ///< compute time of ops producing sequence-quadratic values
  /// The part of attention_s in fused (flash) attention kernels, whose backward recomputes the
  /// scores (DeviceProfile::fused_attention); 0 with eager attention.
  double flash_s = 0;
  /// Compute time of the contractions reading a parameter (the linear layers' GEMMs): what
  /// tensor-parallel collectives can hide behind (async TP).
  double linear_s = 0;
  /// Ring attention's merges (a `cp` mesh axis): each of the cp steps writes its partial output
  /// and folds it into the fp32 accumulator with its log-sum-exp, memory-bound work the fused
  /// kernel does not do when it sees all keys at once (Transformer Engine's per-step output
  /// correction). Forward seconds; priced in the step only for `cp_comm=ring`.
  double ring_merge_s = 0;
  double saved_bytes =
      0;  ///< distinct activations kept for backward (inputs of ops whose gradient needs them)
  double attention_bytes = 0;  ///< the part of saved_bytes that is sequence-quadratic
  double param_elements = 0;   ///< local elements of the parameters the ops read
  int64_t ops = 0;
  /// The sum of two parts (the parameter and saved sets are assumed disjoint).
  PartCost operator+(const PartCost& o) const;
  /// Every field times `k`.
  PartCost scaled(double k) const;
};

/// The three parts. A graph without repeating layers is all `prefix`.
struct ModelParts {
  PartCost prefix;            ///< ops before the repeating layers (embedding)
  PartCost layer;             ///< one repeating unit
  PartCost suffix;            ///< ops after the layers (head, loss)
  double boundary_bytes = 0;  ///< local bytes flowing from one unit into the next
  bool layered = false;
  /// Parameters read by both prefix and suffix (tied embeddings), local elements.
  double shared_param_elements = 0;
  /// Local elements of the graph's floating-point outputs: a language model's logits, what its
  /// loss reads (vocabulary-sized, on the last pipeline stage).
  double output_elements = 0;
};

/// Costs `g` under `prop` (a plan on `mesh`, e.g. from plan_from_strategy) on `cluster`.
/// `one_unit` non-null: the same model built with one repeating unit where `g` has two; the
/// second unit of `g` is the `g.num_ops() - one_unit->num_ops()` ops starting at the first op
/// that reads a parameter whose name `one_unit` lacks. Null: the whole graph is the prefix.
/// Precondition: verified graphs, `prop` made for `g` and `mesh`.
Result<ModelParts> cost_model_parts(const Graph& g, const Mesh& mesh, const Propagation& prop,
                                    const Cluster& cluster, const Graph* one_unit);

/// The cost of `groups` sets of ops of `g` under `prop` on `cluster`: op `id` belongs to set
/// `group[id]` (values outside [0, groups) belong to none). Each set is costed as by
/// cost_model_parts() (fusion across sets included, reshards charged to their consumer).
/// Precondition: as cost_model_parts(); group.size() == g.num_ops().
Result<std::vector<PartCost>> cost_op_groups(const Graph& g, const Mesh& mesh,
                                             const Propagation& prop, const Cluster& cluster,
                                             const std::vector<int>& group, int groups);

/// What heddle's executor does around the ops of `g` on the representative device: loading its
/// tile of every graph input and parameter from the feeds (`compute_s`, at the streaming rate of
/// GEMM operands) and gathering every graph output onto every device from where `prop` leaves it
/// (lowering's replicate_outputs; `comm_s`, `comm_bytes`). Precondition: as cost_model_parts().
Result<PartCost> cost_executor_io(const Graph& g, const Mesh& mesh, const Propagation& prop,
                                  const Cluster& cluster);

}  // namespace heddle::cost
