// Graphviz DOT export of a graph: ops as boxes with their index spaces, inputs and params as
// ellipses, edges labelled with the value and its type.
#pragma once

#include <string>

#include "heddle/ir/Graph.h"

namespace heddle {

/// The DOT text of `g` (render with `dot -Tsvg`). Deterministic for equal graphs.
std::string to_dot(const Graph& g);

}  // namespace heddle
