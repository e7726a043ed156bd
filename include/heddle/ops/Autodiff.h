// Reverse-mode autodiff over the IR and the training-step builder. The backward graph is built
// from the same op vocabulary (plus the gradient helper kinds), so it can be verified, sharded,
// costed and executed like any forward graph.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Ops.h"
#include "heddle/support/Result.h"

namespace heddle {

/// A forward graph extended with the gradients of a scalar loss.
struct Gradients {
  Graph graph;        ///< forward ops followed by backward ops
  ValueId loss = -1;  ///< the loss value (same id as in the forward graph)
  std::vector<std::pair<ValueId, ValueId>> grads;  ///< (param, d loss / d param), param order
};

/// Appends the backward pass of `loss` (a scalar value of `forward`) with respect to every
/// parameter. Gradients flow through every op kind except optimizer updates, top-2 gating (the
/// routing is treated as constant) and the gradient helper kinds (no second order); parameters
/// the loss does not reach get no entry. Diagnostics: a non-scalar loss, an op form the rules do
/// not cover. Parameters named in `frozen` are constants: no gradient flows to them.
Result<Gradients> build_gradients(const Graph& forward, ValueId loss,
                                  const std::set<std::string>& frozen = {});

/// Options of a training step.
struct TrainStepOptions {
  enum class Optimizer : uint8_t { kSgdMomentum, kAdamW };
  Optimizer optimizer = Optimizer::kAdamW;  ///< default AdamW
  SgdOptions sgd;                           ///< used with kSgdMomentum
  AdamWOptions adamw;                       ///< used with kAdamW
  /// Parameters, by name, that get no gradient and no update: an imported model's constants
  /// (ImportedModel::constants). Default none: every parameter the loss reaches trains.
  std::set<std::string> frozen;
};

/// One parameter's update in a training step: values to copy back after the step.
struct ParamUpdate {
  ValueId param = -1;
  ValueId grad = -1;
  ValueId updated = -1;                            ///< the new parameter value
  std::vector<std::pair<ValueId, ValueId>> state;  ///< (state param, its new value)
};

/// A whole training step: forward, loss, backward, optimizer update.
struct TrainStep {
  Graph graph;  ///< outputs: the loss, then every updated parameter and state
  ValueId loss = -1;
  std::vector<ParamUpdate> updates;
};

/// Builds the training step of `forward`, whose single output must be a scalar loss. Optimizer
/// state tensors become params named `m.<param>`, `v.<param>` (AdamW) or `vel.<param>` (SGD).
Result<TrainStep> build_train_step(const Graph& forward, const TrainStepOptions& options = {});

}  // namespace heddle
