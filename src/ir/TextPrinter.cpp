#include "heddle/ir/TextPrinter.h"

#include <cctype>

#include "heddle/ir/TextQuote.h"

namespace heddle {

namespace {

bool is_plain_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

std::string quoted_or_plain(const std::string& s) {
  if (is_plain_identifier(s)) return s;
  return quote_string(s);
}

std::string operand_text(const Graph& g, const Operand& o, const std::vector<std::string>& names,
                         bool with_value) {
  std::string s = with_value ? value_ref(g.value(o.value).name) : "";
  s += o.proj.to_string(names);
  if (o.padded) s += " padded";
  return s;
}

// ` replicate`, ` shard{1=tp}` (a value's tensor dims) or ` split{n=tp}` (an op's index dims,
// named by `names`); empty for no tactic.
std::string tactic_text(const ShardAnnotation& a, const std::vector<std::string>* names) {
  if (a.empty()) return "";
  if (a.replicate) return " replicate";
  std::string s = names ? " split{" : " shard{";
  for (size_t i = 0; i < a.pins.size(); ++i) {
    int64_t d = a.pins[i].dim;
    s += (i ? ", " : "") +
         (names && d >= 0 && d < static_cast<int64_t>(names->size()) ? (*names)[d]
                                                                     : std::to_string(d)) +
         "=" + quoted_or_plain(a.pins[i].axis);
  }
  return s + "}";
}

}  // namespace

std::string value_ref(const std::string& name) { return "%" + quoted_or_plain(name); }

std::string print_op(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  std::string s;
  for (size_t i = 0; i < op.results.size(); ++i) {
    const Value& v = g.value(op.results[i].value);
    s += (i ? ", " : "") + value_ref(v.name) + ": " + v.type.to_string() +
         tactic_text(v.tactic, nullptr);
  }
  s += " = ";
  s += op_kind_name(op.kind);
  s += attrs_to_string(op.attrs);
  s += " " + op.space.to_string();
  std::vector<std::string> names = op.space.names();
  for (size_t i = 0; i < op.inputs.size(); ++i)
    s += (i ? ", " : " ") + operand_text(g, op.inputs[i], names, true);
  s += " ->";
  for (size_t i = 0; i < op.results.size(); ++i)
    s += (i ? ", " : " ") + operand_text(g, op.results[i], names, false);
  return s + tactic_text(op.tactic, &names);
}

std::string print_graph(const Graph& g) {
  std::string s = "graph " + quoted_or_plain(g.name()) + " {\n";
  for (ValueId v : g.inputs())
    s += "  input " + value_ref(g.value(v).name) + ": " + g.type(v).to_string() +
         tactic_text(g.value(v).tactic, nullptr) + "\n";
  for (ValueId v : g.params())
    s += "  param " + value_ref(g.value(v).name) + ": " + g.type(v).to_string() +
         tactic_text(g.value(v).tactic, nullptr) + "\n";
  for (OpId i = 0; i < g.num_ops(); ++i) s += "  " + print_op(g, i) + "\n";
  if (!g.outputs().empty()) {
    s += "  output";
    for (size_t i = 0; i < g.outputs().size(); ++i)
      s += (i ? ", " : " ") + value_ref(g.value(g.outputs()[i]).name);
    s += "\n";
  }
  return s + "}\n";
}

}  // namespace heddle
