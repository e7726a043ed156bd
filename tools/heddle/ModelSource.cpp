// Where MODEL comes from: a zoo preset (with size overrides), an ONNX file, or a text-IR file.
#include <algorithm>
#include <fstream>

#include "Command.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

// A user's graph without outputs computes nothing observable: every pass would delete it all.
Status check_has_outputs(const Graph& g) {
  if (g.num_ops() == 0 || !g.outputs().empty()) return {};
  return Diagnostic(
      SourceLoc{g.source_file(), 0, 0},
      "graph '" + g.name() + "' has no outputs; mark what it computes with 'output %NAME'");
}

// `--dim` binds ONNX dims only: an error for any other MODEL it was given with.
Status no_dims(const std::string& model, const std::map<std::string, int64_t>& dims) {
  if (dims.empty()) return {};
  return Diagnostic(SourceLoc{model, 0, 0}, "--dim applies to ONNX models only");
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

}  // namespace

Result<LoadedModel> load_model(const std::string& model, const zoo::ZooOverrides& overrides,
                               const zoo::ModelOptions& options,
                               const std::map<std::string, int64_t>& dims) {
  if (zoo::is_zoo_model(model)) {
    HEDDLE_TRY(no_dims(model, dims));
    return graph_only(zoo::build_zoo_model(model, overrides, options));
  }
  std::ifstream probe(model);
  if (!probe && !ends_with(model, ".onnx"))
    return graph_only(zoo::build_zoo_model(model, overrides, options));  // names the zoo
  if (overrides.layers || overrides.hidden || overrides.heads || overrides.seq || overrides.vocab ||
      overrides.batch || overrides.ffn || overrides.kv_heads || overrides.experts ||
      overrides.top_k)
    return Diagnostic(SourceLoc{model, 0, 0},
                      "--layers/--hidden/--heads/--seq/--vocab/--batch/--ffn/--kv-heads/"
                      "--experts/--top-k apply to zoo models only");
  if (ends_with(model, ".onnx")) {
    auto imported = import_onnx_file(model, {.dims = dims, .base_dir = ""});
    HEDDLE_TRY(imported);
    HEDDLE_TRY(check_has_outputs(imported->graph));
    for (const auto& [name, value] : dims) {
      const auto& known = imported->dynamic_dims;
      if (!std::binary_search(known.begin(), known.end(), name))
        return Diagnostic(SourceLoc{model, 0, 0},
                          "--dim " + name + "=" + std::to_string(value) +
                              ": the model has no dynamic dim named '" + name + "'" +
                              (known.empty() ? "; all its input dims are fixed"
                                             : "; its dynamic dims are: " + join(known, ", ")));
    }
    LoadedModel m;
    m.graph = std::move(imported->graph);
    m.from_onnx = true;
    m.weights = std::move(imported->weights);
    m.missing_weights = std::move(imported->missing_weights);
    return m;
  }
  HEDDLE_TRY(no_dims(model, dims));
  return graph_only(parse_graph_file(model));
}

Result<Graph> resolve_model(const std::string& model, const zoo::ZooOverrides& overrides,
                            const zoo::ModelOptions& options,
                            const std::map<std::string, int64_t>& dims) {
  auto m = load_model(model, overrides, options, dims);
  HEDDLE_TRY(m);
  return std::move(m->graph);
}

void add_dim_option(CLI::App* app, std::map<std::string, int64_t>& dims) {
  app->add_option_function<std::vector<std::string>>(
         "--dim",
         [&dims](const std::vector<std::string>& items) {
           for (const auto& item : items) {
             size_t eq = item.find('=');
             if (eq == std::string::npos || eq == 0)
               throw CLI::ValidationError("--dim", "expected NAME=VALUE, got '" + item + "'");
             try {
               dims[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
             } catch (const std::exception&) {
               throw CLI::ValidationError("--dim", "VALUE of '" + item + "' is not an integer");
             }
           }
         },
         "ONNX models: bind dynamic dim NAME to VALUE (repeatable)")
      ->take_all();
}

void add_zoo_overrides(CLI::App* app, zoo::ZooOverrides& o) {
  auto opt = [&](const char* flag, std::optional<int64_t>& dst, const char* what) {
    app->add_option_function<int64_t>(
        flag, [&dst](const int64_t& v) { dst = v; }, what);
  };
  opt("--layers", o.layers, "Zoo models: number of layers");
  opt("--hidden", o.hidden, "Zoo models: hidden size");
  opt("--heads", o.heads, "Zoo models: attention heads");
  opt("--seq", o.seq, "Zoo models: sequence length");
  opt("--vocab", o.vocab, "Zoo models: vocabulary size");
  opt("--batch", o.batch, "Zoo models: batch size");
  opt("--ffn", o.ffn, "Zoo models (llama, mixtral, moe): MLP inner width");
  opt("--kv-heads", o.kv_heads, "Zoo models (llama, mixtral): key/value heads");
  opt("--experts", o.experts, "Zoo models (mixtral, moe): experts per MoE layer");
  opt("--top-k", o.top_k, "Zoo models (mixtral, moe): experts per token (2)");
}

Result<cost::ModelSource> resolve_model_source(const std::string& model,
                                               const zoo::ZooOverrides& overrides,
                                               const std::map<std::string, int64_t>& dims) {
  if (zoo::is_zoo_model(model)) {
    HEDDLE_TRY(no_dims(model, dims));
    return cost::zoo_model_source(model, overrides);
  }
  auto g = resolve_model(model, overrides, {}, dims);
  HEDDLE_TRY(g);
  auto diags = verify(*g);
  if (!diags.empty()) return diags.front();
  return cost::graph_model_source(std::move(*g));
}

}  // namespace heddle::cli
