// heddle.load / heddle.from_torch and the Model they return.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include "Bindings.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/model/ScalableModel.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/support/Strings.h"

namespace heddle::python {

namespace {

// `layers=` ... as the zoo takes them; unknown names are errors that list the known ones.
zoo::ZooOverrides overrides_of(const std::map<std::string, int64_t>& given) {
  zoo::ZooOverrides o;
  const std::pair<const char*, std::optional<int64_t>*> known[] = {
      {"layers", &o.layers}, {"hidden", &o.hidden},     {"heads", &o.heads},
      {"seq", &o.seq},       {"vocab", &o.vocab},       {"batch", &o.batch},
      {"ffn", &o.ffn},       {"kv_heads", &o.kv_heads}, {"experts", &o.experts},
      {"top_k", &o.top_k}};
  for (const auto& [key, value] : given) {
    bool found = false;
    for (const auto& [name, field] : known)
      if (key == name) *field = value, found = true;
    if (!found)
      raise(Diagnostic("unknown model override '" + key +
                       "'; zoo models take layers, hidden, heads, seq, vocab, batch, ffn, "
                       "kv_heads, experts, top_k"));
  }
  return o;
}

void check_graph(const Graph& g) {
  auto diags = verify(g);
  if (!diags.empty()) raise(diags.front());
}

py::list values_of(const Graph& g, const std::vector<ValueId>& ids) {
  py::list out;
  for (ValueId v : ids) {
    const TensorType& t = g.type(v);
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    out.append(py::make_tuple(g.value(v).name, shape, std::string(dtype_name(t.dtype()))));
  }
  return out;
}

std::string summary(const PyModel& m) {
  const Graph& g = m.loaded.graph;
  GraphStats s = graph_stats(g);
  s.flops = graph_flops(g);  // as `heddle show` counts them
  std::string out = fmt::format("model {}: {} ops, {} tensors, {} parameters ({}), {:.4g} GFLOP\n",
                                m.name, s.ops, s.tensors, s.parameters,
                                human_bytes(static_cast<double>(s.parameter_bytes)), s.flops / 1e9);
  auto list = [&](const char* what, const std::vector<ValueId>& ids) {
    for (ValueId v : ids)
      out += fmt::format("  {:<7} {} {}\n", what, g.value(v).name, g.type(v).to_string());
  };
  list("input", g.inputs());
  list("output", g.outputs());
  return out;
}

}  // namespace

model::ScalableModel model_source(const PyModel& m, int64_t batch) {
  if (m.is_zoo) {
    zoo::ZooOverrides o = m.request.overrides;
    if (batch > 0) o.batch = batch;
    return unwrap(heddle::model::zoo_scalable_model(m.request.source, o));
  }
  if (batch > 0 && batch != (m.loaded.graph.inputs().empty()
                                 ? 1
                                 : m.loaded.graph.type(m.loaded.graph.inputs()[0]).shape()[0]))
    raise(Diagnostic("batch=" + std::to_string(batch) +
                     " applies to zoo models; this model's batch is fixed by its inputs"));
  return heddle::model::fixed_scalable_model(m.loaded.graph);
}

void bind_model(py::module_& m) {
  py::class_<PyModel>(m, "Model")
      .def_readonly("name", &PyModel::name)
      .def_readonly("is_zoo", &PyModel::is_zoo)
      .def_property_readonly(
          "parameters", [](const PyModel& p) { return graph_stats(p.loaded.graph).parameters; })
      .def_property_readonly("flops", [](const PyModel& p) { return graph_flops(p.loaded.graph); })
      .def_property_readonly("ops", [](const PyModel& p) { return p.loaded.graph.num_ops(); })
      .def_property_readonly("tensors",
                             [](const PyModel& p) { return graph_stats(p.loaded.graph).tensors; })
      .def_property_readonly(
          "inputs",
          [](const PyModel& p) { return values_of(p.loaded.graph, p.loaded.graph.inputs()); })
      .def_property_readonly(
          "outputs",
          [](const PyModel& p) { return values_of(p.loaded.graph, p.loaded.graph.outputs()); })
      .def("summary", &summary)
      .def("text", [](const PyModel& p) { return print_graph(p.loaded.graph); });

  m.def("load", [](const std::string& source, const std::map<std::string, int64_t>& overrides,
                   const std::map<std::string, int64_t>& dims) {
    PyModel p;
    p.request = {.source = source,
                 .overrides = overrides_of(overrides),
                 .options = {},
                 .dims = dims,
                 .loss = ""};
    p.name = source;
    p.is_zoo = zoo::is_zoo_model(source);
    p.loaded = unwrap(model::load_model(p.request));
    check_graph(p.loaded.graph);
    return p;
  });
  m.def("load_onnx_bytes", [](const py::bytes& data, const std::string& name,
                              const std::map<std::string, int64_t>& dims) {
    PyModel p;
    p.onnx_bytes = std::string(data);
    p.name = name;
    auto imported = unwrap(import_onnx_bytes(
        p.onnx_bytes, name, {.dims = dims, .base_dir = "", .batch = 0, .loss = ""}));
    p.loaded.graph = std::move(imported.graph);
    p.loaded.from_onnx = true;
    p.loaded.weights = std::move(imported.weights);
    p.loaded.missing_weights = std::move(imported.missing_weights);
    check_graph(p.loaded.graph);
    return p;
  });
}

}  // namespace heddle::python
