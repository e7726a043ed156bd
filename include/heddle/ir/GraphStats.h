// Size figures of a graph derived from index spaces and projections alone: FLOPs, parameters,
// bytes. Good for summaries; the cost model refines compute per op.
#pragma once

#include <cstdint>

#include "heddle/ir/Graph.h"

namespace heddle {

/// Floating-point operations of op `id`: index-space volume times the work per point, where
/// contractions and windowed reductions do a multiply-add (2 FLOPs) per element of their largest
/// input window, elementwise ops 1, normalizations 5 and layout ops 0.
/// Precondition: the graph passed verify().
double op_flops(const Graph& g, OpId id);

/// Summary figures of a verified graph.
struct GraphStats {
  int64_t ops = 0;         ///< number of ops
  int64_t tensors = 0;     ///< number of values (inputs, params, results)
  int64_t parameters = 0;  ///< elements in all params
  int64_t parameter_bytes = 0;
  int64_t activation_bytes = 0;  ///< bytes of all op results
  double flops = 0;              ///< sum of op_flops over ops
};

/// The summary of `g`. Precondition: the graph passed verify().
GraphStats graph_stats(const Graph& g);

}  // namespace heddle
