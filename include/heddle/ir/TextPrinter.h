// The text form of graphs. One statement per line; an op shows its index space and projections:
//   %h: f32[64, 256] = einsum{spec="mk,kn->mn"} [m=64, n=256, k=784:sum] %x(m, k), %w(k, n) -> (m,
//   n)
// parse_graph() reads exactly what print_graph() writes.
#pragma once

#include <string>

#include "heddle/ir/Graph.h"

namespace heddle {

/// The text form of `g`. Precondition: every op's projection ranks match its index space (true
/// for any graph the parser produced); other rule violations print as they are.
std::string print_graph(const Graph& g);

/// The single statement defining op `id`, without indentation or newline.
std::string print_op(const Graph& g, OpId id);

/// A value reference: `%x`, or `%"a/b:0"` when the name is not a plain identifier.
std::string value_ref(const std::string& name);

}  // namespace heddle
