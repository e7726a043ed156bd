// The model sources the simulator rebuilds at other layer counts and batch sizes: zoo presets
// (their layer count and repeating unit found) and fixed graphs.
#include <memory>

#include "heddle/cost/Simulator.h"

namespace heddle::cost {

namespace {

// Tokens per sequence of a model whose first input is integer token ids `[batch, seq]`, else 0.
int64_t sequence_length(const Graph& g) {
  if (g.inputs().empty()) return 0;
  const TensorType& t = g.type(g.inputs().front());
  if (t.rank() != 2 || dtype_is_float(t.dtype())) return 0;
  return t.shape()[1];
}

}  // namespace

Result<ModelSource> zoo_model_source(const std::string& name, const zoo::ZooOverrides& over) {
  if (!zoo::is_zoo_model(name)) {
    auto g = zoo::build_zoo_model(name, over);  // the diagnostic lists the presets
    HEDDLE_TRY(g);
  }
  std::string family;
  for (const auto& e : zoo::zoo_entries())
    if (e.name == name) family = e.family;
  auto full = zoo::build_zoo_model(name, over);
  HEDDLE_TRY(full);
  ModelSource src;
  src.name = name;
  const Graph& g = *full;
  src.batch = g.inputs().empty() ? 1 : g.type(g.inputs().front()).shape()[0];
  src.seq = sequence_length(g);
  if (family == "gpt" || family == "llama" || family == "moe" || family == "vit") {
    // The layer count of the preset: rebuild with one more layer and count new parameters is
    // not needed; the zoo exposes GPT configs, others keep their override or preset default.
    if (auto c = zoo::gpt_preset(name, over); c.ok()) {
      src.layers = c->layers;
      src.gpt = *c;
    } else if (over.layers) {
      src.layers = *over.layers;
    }
    src.unit = family == "moe" ? 2 : 1;
  }
  if (src.layers == 0 && (family == "llama" || family == "moe" || family == "vit")) {
    // Count layers by how many parameters one extra layer adds.
    zoo::ZooOverrides one = over, two = over;
    one.layers = 2;
    two.layers = 4;
    auto g1 = zoo::build_zoo_model(name, one), g2 = zoo::build_zoo_model(name, two);
    if (g1.ok() && g2.ok()) {
      size_t per2 = g2->params().size() - g1->params().size();  // params of two layers
      size_t base = g1->params().size() - per2;
      if (per2 > 0 && g.params().size() >= base)
        src.layers = static_cast<int64_t>((g.params().size() - base) * 2 / per2);
    }
  }
  src.build = [name, over](int64_t layers, int64_t batch) {
    zoo::ZooOverrides o = over;
    if (layers > 0) o.layers = layers;
    o.batch = batch;
    return zoo::build_zoo_model(name, o);
  };
  src.build_loss = [name, over](int64_t layers, int64_t batch) {
    zoo::ZooOverrides o = over;
    if (layers > 0) o.layers = layers;
    o.batch = batch;
    zoo::ModelOptions mo;
    mo.with_loss = true;
    return zoo::build_zoo_model(name, o, mo);
  };
  return src;
}

ModelSource graph_model_source(Graph g) {
  ModelSource src;
  src.name = g.name();
  src.batch = g.inputs().empty() ? 1 : std::max<int64_t>(g.type(g.inputs().front()).shape()[0], 1);
  src.seq = sequence_length(g);
  auto shared = std::make_shared<Graph>(std::move(g));
  src.build = [shared](int64_t, int64_t) -> Result<Graph> { return *shared; };
  src.rebuilds_batch = false;
  return src;
}

}  // namespace heddle::cost
