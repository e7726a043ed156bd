// FLOP and byte counts per op, from its kind, index space and projections: what the cost model
// and `heddle show` report. Gathers and layout copies cost bytes, not FLOPs.
#pragma once

#include "heddle/ir/Graph.h"

namespace heddle {

/// The work of one op.
struct OpCost {
  double flops = 0;          ///< floating-point operations (a multiply-add counts 2)
  double bytes_read = 0;     ///< bytes of every input element the op touches, once each
  double bytes_written = 0;  ///< bytes of every result element
  bool operator==(const OpCost&) const = default;
};

/// The cost of op `id`: contractions 2 FLOPs per index point (embedding lookups 0: a gather),
/// convolutions 2 per tap, elementwise ops 1 per point, reductions 1 per element reduced,
/// row-wise normalizations about 5 per row element, optimizers 4 (SGD) or 12 (AdamW) per element.
/// Precondition: the graph passed verify().
OpCost op_cost(const Graph& g, OpId id);

/// Sum of op_cost(g, i).flops over all ops.
double graph_flops(const Graph& g);

}  // namespace heddle
