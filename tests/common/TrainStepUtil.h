// Shared by tests that run training steps in the interpreter: copying a step's results back.
#pragma once

#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"

namespace heddle::testing {

/// Copies the updated parameters and optimizer state that `step` output (`outs`: the loss, then
/// per update the parameter and its state, in order) into the interpreter's parameters.
inline void apply_updates(Interpreter& it, const TrainStep& step, const std::vector<Tensor>& outs) {
  size_t k = 1;
  for (const auto& u : step.updates) {
    it.set_param(u.param, outs[k++]);
    for (const auto& s : u.state) it.set_param(s.first, outs[k++]);
  }
}

}  // namespace heddle::testing
