// Models described for costing: zoo presets (rebuilt at other layer counts and batch sizes, their
// repeating layers from the zoo) and fixed graphs.
#include "heddle/model/ScalableModel.h"

#include <algorithm>
#include <memory>

#include "heddle/ir/Verifier.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle::model {

namespace {

// Tokens per sequence of a model whose first input is integer token ids `[batch, seq]`, else 0.
int64_t sequence_length(const Graph& g) {
  if (g.inputs().empty()) return 0;
  const TensorType& t = g.type(g.inputs().front());
  if (t.rank() != 2 || dtype_is_float(t.dtype())) return 0;
  return t.shape()[1];
}

// A builder of preset `name` at a layer count (0: the preset's) and batch.
std::function<Result<Graph>(int64_t, int64_t)> zoo_builder(const std::string& name,
                                                           const zoo::ZooOverrides& over,
                                                           bool with_loss) {
  return [name, over, with_loss](int64_t layers, int64_t batch) {
    zoo::ZooOverrides o = over;
    if (layers > 0) o.layers = layers;
    o.batch = batch;
    zoo::ModelOptions mo;
    mo.with_loss = with_loss;
    return zoo::build_zoo_model(name, o, mo);
  };
}

// An ONNX file for costing, imported without its weights: with `--batch` it is rebuilt at any
// batch (re-imported; OnnxImportOptions::batch), and its training step has the requested loss.
Result<ScalableModel> onnx_scalable_model(const ModelRequest& r) {
  auto bytes = read_onnx_shapes_only(r.source);
  HEDDLE_TRY(bytes);
  auto shared = std::make_shared<const std::string>(std::move(*bytes));
  const std::string file = r.source;
  auto importer = [shared, file](OnnxImportOptions o) {
    o.base_dir = ".";
    return [shared, file, o](int64_t, int64_t batch) -> Result<Graph> {
      OnnxImportOptions at = o;
      if (at.batch > 0) at.batch = batch;  // re-batching asked for: any batch
      auto m = import_onnx_bytes(*shared, file, at);
      HEDDLE_TRY(m);
      return std::move(m->graph);
    };
  };
  ModelRequest forward = r;
  forward.options = {};
  auto g = importer(onnx_options(forward, false))(0, r.overrides.batch.value_or(0));
  HEDDLE_TRY(g);
  auto diags = verify(*g);
  if (!diags.empty()) return diags.front();
  ScalableModel m = fixed_scalable_model(std::move(*g));
  m.build_loss = importer(onnx_options(forward, true));
  if (r.overrides.batch) {
    m.build = importer(onnx_options(forward, false));
    m.rebuilds_batch = true;
  }
  return m;
}

}  // namespace

Result<ScalableModel> zoo_scalable_model(const std::string& name, const zoo::ZooOverrides& over) {
  auto repeats = zoo::zoo_layers(name, over);
  HEDDLE_TRY(repeats);
  auto full = zoo::build_zoo_model(name, over);
  HEDDLE_TRY(full);
  ScalableModel m;
  m.name = name;
  const Graph& g = *full;
  m.batch = g.inputs().empty() ? 1 : g.type(g.inputs().front()).shape()[0];
  m.seq = sequence_length(g);
  m.layers = repeats->layers;
  m.unit = repeats->unit;
  if (auto c = zoo::gpt_preset(name, over); c.ok()) m.gpt = *c;
  m.build = zoo_builder(name, over, false);
  m.build_loss = zoo_builder(name, over, true);
  return m;
}

ScalableModel fixed_scalable_model(Graph g) {
  ScalableModel m;
  m.name = g.name();
  m.batch = g.inputs().empty() ? 1 : std::max<int64_t>(g.type(g.inputs().front()).shape()[0], 1);
  m.seq = sequence_length(g);
  auto shared = std::make_shared<Graph>(std::move(g));
  m.build = [shared](int64_t, int64_t) -> Result<Graph> { return *shared; };
  m.rebuilds_batch = false;
  return m;
}

Result<ScalableModel> load_scalable_model(const ModelRequest& request) {
  if (zoo::is_zoo_model(request.source)) {
    if (!request.dims.empty())
      return Diagnostic(SourceLoc{request.source, 0, 0}, "--dim applies to ONNX models only");
    return zoo_scalable_model(request.source, request.overrides);
  }
  if (request.source.size() > 5 &&
      request.source.compare(request.source.size() - 5, 5, ".onnx") == 0) {
    if (request.overrides.layers || request.overrides.hidden || request.overrides.heads ||
        request.overrides.seq || request.overrides.vocab || request.overrides.ffn ||
        request.overrides.kv_heads || request.overrides.experts || request.overrides.top_k)
      return load_graph(request).error();  // load_model's diagnostic for the overrides
    return onnx_scalable_model(request);
  }
  ModelRequest forward = request;
  forward.options = {};
  auto g = load_graph(forward);
  HEDDLE_TRY(g);
  auto diags = verify(*g);
  if (!diags.empty()) return diags.front();
  return fixed_scalable_model(std::move(*g));
}

}  // namespace heddle::model
