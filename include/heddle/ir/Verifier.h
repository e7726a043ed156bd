// The structural rules of the IR: projections stay inside their tensors, results are covered
// exactly once, arities, attributes and element types agree. Each violation is one diagnostic.
#pragma once

#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Every rule violation in `g`, in op order; empty when the graph is well formed. Each diagnostic
/// names the op (kind and first result), the operand and the rule, at the op's source location.
std::vector<Diagnostic> verify(const Graph& g);

/// verify() reduced to its first diagnostic (or success).
Status verify_ok(const Graph& g);

/// Whether the points of index space `extents` (its parallel dims; dims listed in `reduce_dims`
/// must have zero columns) write every element of a tensor of `shape` exactly once through `proj`.
/// Decided without enumerating points: per tensor dim, the index dims that reach it must form a
/// mixed-radix numbering whose smallest stride is the window. Returns the rule broken, if any.
/// Precondition: proj.index_rank() == extents.size(), proj.tensor_rank() == shape.size().
Status check_exact_cover(const IndexProjection& proj, const IVec& extents,
                         const std::vector<bool>& reduce_dims, const IVec& shape);

}  // namespace heddle
