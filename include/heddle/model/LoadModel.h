// Loading a model: a zoo preset (with size overrides and options), a text-IR file or an ONNX file
// (with its dynamic dims bound) into a graph and, for ONNX, the data of its parameters. Every front
// end (the CLI, the Python module) calls this instead of telling the three sources apart itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/Graph.h"
#include "heddle/ops/Tensor.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/support/Result.h"

namespace heddle::model {

/// What to load, as a front end received it.
struct ModelRequest {
  /// A zoo preset name, a path ending in `.onnx`, else a text-IR file. A name that is neither a
  /// preset nor an existing file is reported against the zoo (the diagnostic lists the presets).
  std::string source;
  /// Zoo models: sizes replacing the preset's; default none. ONNX models take `batch` only
  /// (re-batching, OnnxImportOptions::batch); an error for text-IR files and for other fields.
  zoo::ZooOverrides overrides;
  /// How the model is built: zoo presets take all of it; `with_loss` on an ONNX model appends
  /// the loss named by `loss`. Default: the forward pass.
  zoo::ModelOptions options;
  /// ONNX models only: values of the model's dynamic input dims by name; default none. An error
  /// for other sources, and for a name the model does not have.
  std::map<std::string, int64_t> dims;
  /// ONNX models with `options.with_loss` (and planning an ONNX model's training step): the loss
  /// appended to its output, `cross_entropy` or `mse` (OnnxImportOptions::loss); default empty:
  /// `auto`. An error for other sources.
  std::string loss;
};

/// A loaded model with, for ONNX files, the data of its parameters.
struct LoadedModel {
  Graph graph;
  bool from_onnx = false;                    ///< weights below are the model's own
  std::map<ValueId, Tensor> weights;         ///< ONNX parameter data
  std::vector<std::string> missing_weights;  ///< ONNX parameters without data
  std::vector<std::string> constants;        ///< ONNX parameters that are constants (never trained)
};

/// Loads `request.source`. Diagnostics (located at the source): unknown zoo names, overrides or
/// dims given to a source that does not take them, unknown dynamic dims, a graph without outputs,
/// and whatever the text parser or the ONNX importer reports.
Result<LoadedModel> load_model(const ModelRequest& request);

/// load_model() for a run: the model must be runnable. Diagnostics: those of load_model(),
/// parameters without weight data.
Result<LoadedModel> load_model_to_run(const ModelRequest& request);

/// The model of `request` rebuilt at another batch (zoo presets, with their overrides and
/// options); null for files, which cannot be rebuilt.
std::function<Result<Graph>(int64_t batch)> batch_rebuilder(const ModelRequest& request);

/// The ONNX import options of `r`: its dims, its batch override (re-batching) and, with
/// `with_loss`, its loss (`auto` when none is named).
OnnxImportOptions onnx_options(const ModelRequest& r, bool with_loss);

/// load_model() for callers that need only the graph.
Result<Graph> load_graph(const ModelRequest& request);

}  // namespace heddle::model
