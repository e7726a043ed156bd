// Deterministic run data tile by tile: parameter initialisation and random inputs whose elements
// are bit-identical to init_param() and random_inputs() (Interpreter.h, which are these over the
// whole tensor) while allocating only one box, so no device needs a whole tensor in memory.
#pragma once

#include <cstdint>
#include <string>

#include "heddle/ir/Box.h"
#include "heddle/ir/TensorType.h"
#include "heddle/ops/Tensor.h"

namespace heddle {

/// The elements of init_param(name, type, seed) inside `box`, as a tile with that region. Costs
/// time proportional to the elements before the box's last one, memory only for the box.
/// Precondition: Box::of_shape(type.shape()).contains(box).
Tensor init_param_tile(const std::string& name, const TensorType& type, uint64_t seed,
                       const Box& box);

/// The elements inside `box` of the random input named `name` of type `type`: floats uniform in
/// [-1, 1), integers uniform in [0, int_hi) (bools in [0, 2)), seeded by `seed` and the name.
/// Precondition: Box::of_shape(type.shape()).contains(box); int_hi >= 1 for integer types.
Tensor random_input_tile(const std::string& name, const TensorType& type, uint64_t seed,
                         int64_t int_hi, const Box& box);

}  // namespace heddle
