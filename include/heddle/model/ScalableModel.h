// A model described for costing: how to rebuild it at other layer counts and batch sizes, and its
// repeating layers. The cost model and the searches take this description and never look at where
// the model came from (a zoo family, a file).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "heddle/ir/Graph.h"
#include "heddle/model/LoadModel.h"
#include "heddle/ops/zoo/Models.h"
#include "heddle/support/Result.h"

namespace heddle::model {

/// A model that can be rebuilt at other layer counts and batch sizes.
struct ScalableModel {
  std::string name;
  /// Builds the model with `layers` repeating layers (ignored when `layers` == 0 here) and batch
  /// `batch`. Must be deterministic.
  std::function<Result<Graph>(int64_t layers, int64_t batch)> build;
  int64_t layers = 0;  ///< total repeating layers; 0: not layered (built once, whole)
  int64_t unit = 1;    ///< layers per repeating unit (2 for MoE: dense + expert layer)
  int64_t batch = 1;   ///< global batch (sequences or samples per step)
  /// Tokens per sequence (dim 1 of an integer token-id input `[batch, seq]`); 0: the model's
  /// samples are not token sequences (images, features).
  int64_t seq = 0;
  std::optional<zoo::GptConfig> gpt;  ///< set for GPT-style models: Megatron's model FLOPs
  bool rebuilds_batch = true;  ///< `build` honours `batch` (false: a fixed graph, one micro-batch)
  /// As `build`, with the model's loss as its single output (zoo models: `with_loss`); null when
  /// the model has none. SimulateOptions::autodiff builds the training step from it.
  std::function<Result<Graph>(int64_t layers, int64_t batch)> build_loss;
};

/// A zoo preset (overrides as in `heddle show`; the batch override is the global batch), its
/// repeating layers as the zoo describes them (zoo::zoo_layers).
Result<ScalableModel> zoo_scalable_model(const std::string& name, const zoo::ZooOverrides& over);

/// A fixed graph: one micro-batch, not layered; its batch is dim 0 of its first input.
ScalableModel fixed_scalable_model(Graph g);

/// `request.source` for costing: a zoo preset rebuilt at other sizes, else a fixed graph (a
/// text-IR or ONNX file, dynamic dims bound by `request.dims`), verified. An ONNX file is imported
/// without its weights; with a batch override it is re-batched and rebuilt at any batch, and its
/// `build_loss` appends `request.loss` (`auto` when empty). `request.options` is not used.
/// Diagnostics as load_model(), and the verifier's first.
Result<ScalableModel> load_scalable_model(const ModelRequest& request);

}  // namespace heddle::model
