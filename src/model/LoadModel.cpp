// Where a model comes from: a zoo preset (with size overrides), an ONNX file, or a text-IR file.
#include "heddle/model/LoadModel.h"

#include <algorithm>
#include <fstream>

#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/TextParser.h"
#include "heddle/support/Strings.h"

namespace heddle::model {

namespace {

// A user's graph without outputs computes nothing observable: every pass would delete it all.
Status check_has_outputs(const Graph& g) {
  if (g.num_ops() == 0 || !g.outputs().empty()) return {};
  return Diagnostic(
      SourceLoc{g.source_file(), 0, 0},
      "graph '" + g.name() + "' has no outputs; mark what it computes with 'output %NAME'");
}

// `--dim` binds ONNX dims only: an error for any other source it was given with.
Status no_dims(const ModelRequest& r) {
  if (r.dims.empty()) return {};
  return Diagnostic(SourceLoc{r.source, 0, 0}, "--dim applies to ONNX models only");
}

// Size overrides apply to zoo presets only; ONNX models re-batch (`onnx`: --batch is allowed).
Status no_overrides(const ModelRequest& r, bool onnx) {
  const auto& o = r.overrides;
  if (!(o.layers || o.hidden || o.heads || o.seq || o.vocab || (o.batch && !onnx) || o.ffn ||
        o.kv_heads || o.experts || o.top_k))
    return {};
  return Diagnostic(SourceLoc{r.source, 0, 0},
                    onnx ? "--layers/--hidden/--heads/--seq/--vocab/--ffn/--kv-heads/--experts/"
                           "--top-k apply to zoo models only (an ONNX model takes --batch)"
                         : "--layers/--hidden/--heads/--seq/--vocab/--batch/--ffn/--kv-heads/"
                           "--experts/--top-k apply to zoo models only");
}

Result<LoadedModel> graph_only(Result<Graph> g) {
  HEDDLE_TRY(g);
  HEDDLE_TRY(check_has_outputs(*g));
  LoadedModel m;
  m.graph = std::move(*g);
  return m;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every `dims` name must be one of the model's dynamic dims.
Status check_dims_known(const ModelRequest& r, const std::vector<std::string>& known) {
  for (const auto& [name, value] : r.dims) {
    if (std::binary_search(known.begin(), known.end(), name)) continue;
    return Diagnostic(SourceLoc{r.source, 0, 0},
                      "--dim " + name + "=" + std::to_string(value) +
                          ": the model has no dynamic dim named '" + name + "'" +
                          (known.empty() ? "; all its input dims are fixed"
                                         : "; its dynamic dims are: " + join(known, ", ")));
  }
  return {};
}

Result<LoadedModel> load_onnx(const ModelRequest& r) {
  auto imported = import_onnx_file(r.source, onnx_options(r, r.options.with_loss));
  HEDDLE_TRY(imported);
  HEDDLE_TRY(check_has_outputs(imported->graph));
  HEDDLE_TRY(check_dims_known(r, imported->dynamic_dims));
  LoadedModel m;
  m.graph = std::move(imported->graph);
  m.from_onnx = true;
  m.weights = std::move(imported->weights);
  m.missing_weights = std::move(imported->missing_weights);
  m.constants = std::move(imported->constants);
  return m;
}

}  // namespace

OnnxImportOptions onnx_options(const ModelRequest& r, bool with_loss) {
  OnnxImportOptions o;
  o.dims = r.dims;
  o.batch = r.overrides.batch.value_or(0);
  if (with_loss) o.loss = r.loss.empty() ? "auto" : r.loss;
  return o;
}

Result<LoadedModel> load_model(const ModelRequest& r) {
  const std::string& source = r.source;
  if (zoo::is_zoo_model(source)) {
    HEDDLE_TRY(no_dims(r));
    if (!r.loss.empty())
      return Diagnostic(SourceLoc{source, 0, 0},
                        "--loss applies to ONNX models; zoo models bring their own loss");
    return graph_only(zoo::build_zoo_model(source, r.overrides, r.options));
  }
  std::ifstream probe(source);
  if (!probe && !ends_with(source, ".onnx"))  // the zoo's diagnostic lists the presets
    return graph_only(zoo::build_zoo_model(source, r.overrides, r.options));
  const bool onnx = ends_with(source, ".onnx");
  HEDDLE_TRY(no_overrides(r, onnx));
  if (!onnx && !r.loss.empty())
    return Diagnostic(SourceLoc{source, 0, 0},
                      "--loss applies to ONNX models (zoo and text-IR models bring their own)");
  if (onnx) return load_onnx(r);
  HEDDLE_TRY(no_dims(r));
  return graph_only(parse_graph_file(source));
}

Result<LoadedModel> load_model_to_run(const ModelRequest& r) {
  auto loaded = load_model(r);
  HEDDLE_TRY(loaded);
  if (!loaded->missing_weights.empty())
    return Diagnostic(
        SourceLoc{r.source, 0, 0},
        "weights are missing for " + std::to_string(loaded->missing_weights.size()) +
            " parameter(s) (first: '" + loaded->missing_weights[0] +
            "'); the file has no weight data (stripped, or external data not found). show, plan "
            "and simulate work without weights; run needs them");
  return loaded;
}

std::function<Result<Graph>(int64_t batch)> batch_rebuilder(const ModelRequest& r) {
  if (!zoo::is_zoo_model(r.source)) return nullptr;
  return [r](int64_t batch) {
    zoo::ZooOverrides over = r.overrides;
    over.batch = batch;
    return zoo::build_zoo_model(r.source, over, r.options);
  };
}

Result<Graph> load_graph(const ModelRequest& request) {
  auto m = load_model(request);
  HEDDLE_TRY(m);
  return std::move(m->graph);
}

}  // namespace heddle::model
