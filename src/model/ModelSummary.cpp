// The model's summary for people (heddle/model/ModelSummary.h).
#include "heddle/model/ModelSummary.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/support/Strings.h"

namespace heddle::model {

namespace {

nlohmann::json value_list(const Graph& g, const std::vector<ValueId>& ids) {
  nlohmann::json a = nlohmann::json::array();
  for (ValueId v : ids) a.push_back({{"name", g.value(v).name}, {"type", g.type(v).to_string()}});
  return a;
}

GraphStats stats_with_flops(const Graph& g) {
  GraphStats s = graph_stats(g);
  s.flops = graph_flops(g);
  return s;
}

// The inputs and parameters, `limit` rows at most.
std::string values_table(const Graph& g, int limit) {
  std::string out =
      fmt::format("\n{:<8} {:<28} {:<24} {:>12}\n", "role", "tensor", "type", "bytes");
  int64_t listed = 0;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      if (listed++ >= limit) continue;
      out += fmt::format("{:<8} {:<28} {:<24} {:>12}\n", value_role_name(g.value(v).role),
                         value_ref(g.value(v).name), g.type(v).to_string(),
                         human_bytes(static_cast<double>(g.type(v).bytes())));
    }
  if (listed > limit)
    out += fmt::format("... {} more inputs and params\n",
                       static_cast<int64_t>(g.inputs().size() + g.params().size()) - limit);
  return out;
}

// The ops, `limit` rows at most.
std::string ops_table(const Graph& g, int limit) {
  std::string out = fmt::format("\n{:<5} {:<14} {:<20} {:<24} {:>10}  {}\n", "#", "op", "result",
                                "type", "FLOPs", "index space");
  int64_t shown = 0;
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (shown == limit) {
      out += fmt::format("... {} more ops (--limit N shows more, --text FILE writes them all)\n",
                         g.num_ops() - shown);
      break;
    }
    const Op& op = g.op(i);
    ValueId r = op.results.empty() ? -1 : op.results[0].value;
    out += fmt::format("{:<5} {:<14} {:<20} {:<24} {:>10}  {}\n", i, op_kind_name(op.kind),
                       r < 0 ? "" : value_ref(g.value(r).name), r < 0 ? "" : g.type(r).to_string(),
                       human_count(op_cost(g, i).flops), op.space.to_string());
    ++shown;
  }
  return out;
}

}  // namespace

std::string summary_text(const Graph& g, int limit) {
  const GraphStats s = stats_with_flops(g);
  std::string out = fmt::format("graph {}{}\n", g.name(),
                                g.source_file().empty() ? "" : " (" + g.source_file() + ")");
  out += fmt::format("  ops          {}\n", s.ops);
  out += fmt::format("  tensors      {}\n", s.tensors);
  out += fmt::format("  parameters   {} ({})\n", human_count(static_cast<double>(s.parameters)),
                     human_bytes(static_cast<double>(s.parameter_bytes)));
  out += fmt::format("  activations  {}\n", human_bytes(static_cast<double>(s.activation_bytes)));
  out += fmt::format("  FLOPs        {}\n", human_count(s.flops));
  for (ValueId v : g.inputs())
    out +=
        fmt::format("  input        {}: {}\n", value_ref(g.value(v).name), g.type(v).to_string());
  const size_t kMaxOutputs = 8;  // training graphs output every updated parameter
  for (size_t i = 0; i < g.outputs().size() && i < kMaxOutputs; ++i)
    out += fmt::format("  output       {}: {}\n", value_ref(g.value(g.outputs()[i]).name),
                       g.type(g.outputs()[i]).to_string());
  if (g.outputs().size() > kMaxOutputs)
    out += fmt::format("  output       ... {} more\n", g.outputs().size() - kMaxOutputs);
  std::map<std::string, int64_t> kinds;
  for (const Op& op : g.ops()) ++kinds[std::string(op_kind_name(op.kind))];
  std::vector<std::string> parts;
  for (const auto& [k, n] : kinds) parts.push_back(k + " x" + std::to_string(n));
  if (!parts.empty()) out += fmt::format("  op kinds     {}\n", join(parts, ", "));
  return out + values_table(g, limit) + ops_table(g, limit);
}

nlohmann::json summary_json(const Graph& g) {
  const GraphStats s = stats_with_flops(g);
  return {{"graph", g.name()},
          {"ops", s.ops},
          {"tensors", s.tensors},
          {"parameters", s.parameters},
          {"parameter_bytes", s.parameter_bytes},
          {"activation_bytes", s.activation_bytes},
          {"flops", s.flops},
          {"inputs", value_list(g, g.inputs())},
          {"outputs", value_list(g, g.outputs())}};
}

std::string zoo_list_text() {
  std::string out = fmt::format("{:<18} {:<8} {}\n", "model", "family", "description");
  for (const auto& e : zoo::zoo_entries())
    out += fmt::format("{:<18} {:<8} {}\n", e.name, e.family, e.description);
  return out;
}

}  // namespace heddle::model
