#include "heddle/ir/DotExport.h"

#include "heddle/ir/TextPrinter.h"

namespace heddle {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string source_node(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.role == ValueRole::kResult) return "op" + std::to_string(val.producer);
  return "v" + std::to_string(v);
}

}  // namespace

std::string to_dot(const Graph& g) {
  std::string s = "digraph \"" + escape(g.name()) + "\" {\n";
  s += "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  s += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (ValueId v : g.inputs())
    s += "  v" + std::to_string(v) + " [shape=ellipse, label=\"" +
         escape(value_ref(g.value(v).name) + "\n" + g.type(v).to_string()) + "\"];\n";
  for (ValueId v : g.params())
    s += "  v" + std::to_string(v) + " [shape=ellipse, style=filled, fillcolor=\"#e8e8e8\", " +
         "label=\"" + escape(value_ref(g.value(v).name) + "\n" + g.type(v).to_string()) + "\"];\n";
  for (OpId i = 0; i < g.num_ops(); ++i) {
    const Op& op = g.op(i);
    std::string label = std::string(op_kind_name(op.kind)) + attrs_to_string(op.attrs) + "\n" +
                        op.space.to_string();
    s += "  op" + std::to_string(i) + " [shape=box, style=rounded, label=\"" + escape(label) +
         "\"];\n";
    std::vector<std::string> names = op.space.names();
    for (const auto& in : op.inputs) {
      const Value& v = g.value(in.value);
      s += "  " + source_node(g, in.value) + " -> op" + std::to_string(i) + " [label=\"" +
           escape(value_ref(v.name) + " " + v.type.to_string() + "\n" + in.proj.to_string(names)) +
           "\"];\n";
    }
  }
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    ValueId v = g.outputs()[k];
    s += "  out" + std::to_string(k) + " [shape=doublecircle, label=\"" +
         escape(value_ref(g.value(v).name)) + "\"];\n";
    s += "  " + source_node(g, v) + " -> out" + std::to_string(k) + " [label=\"" +
         escape(g.type(v).to_string()) + "\"];\n";
  }
  return s + "}\n";
}

}  // namespace heddle
