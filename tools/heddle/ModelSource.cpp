// Where MODEL comes from: a zoo preset (with size overrides) or a text-IR file.
#include <fstream>

#include "Command.h"
#include "heddle/ir/TextParser.h"

namespace heddle::cli {

Result<Graph> resolve_model(const std::string& model, const zoo::ZooOverrides& overrides,
                            const zoo::ModelOptions& options) {
  if (zoo::is_zoo_model(model)) return zoo::build_zoo_model(model, overrides, options);
  std::ifstream probe(model);
  if (!probe) return zoo::build_zoo_model(model, overrides, options);  // names the zoo
  if (overrides.layers || overrides.hidden || overrides.heads || overrides.seq || overrides.vocab ||
      overrides.batch)
    return Diagnostic(SourceLoc{model, 0, 0},
                      "--layers/--hidden/--heads/--seq/--vocab/--batch apply to zoo models only");
  return parse_graph_file(model);
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
}

}  // namespace heddle::cli
