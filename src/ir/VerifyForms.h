// Private to the verifier: the rules that tie an op kind's attributes to its projections (one
// source of truth, docs/ir.md "Attributes and projections") and keep every window in the shape
// its kernel reads.
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/Graph.h"

namespace heddle::verify_detail {

/// The form rules of op `id`: einsum spec vs projections; conv2d stride, padding, dilation,
/// groups and window vs the input projection; pooling kernel, stride and padding vs the window;
/// softmax axis vs the window; normalization windows of equal size. Returns one message per
/// broken rule (without the op prefix). Precondition: the op passed the generic rules (arity,
/// attribute types, ranks, bounds, exact cover).
std::vector<std::string> check_form(const Graph& g, OpId id);

}  // namespace heddle::verify_detail
