// `heddle show`: what a model is: ops, tensors, parameters, FLOPs, a shape table; exports to the
// text form, Graphviz DOT and JSON.
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "Command.h"
#include "heddle/ir/DotExport.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ProgramFiles.h"
#include "heddle/search/RunPlan.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

struct ShowOptions {
  std::string model;
  bool list = false;
  bool train = false;
  zoo::ZooOverrides overrides;
  std::map<std::string, int64_t> dims;
  std::string loss;  ///< --loss: an ONNX model's training loss (default empty: auto)
  std::string dot_file;
  std::string text_file;
  bool json = false;
  int limit = 40;
  std::string mesh;
  std::string strategy;
  std::string emit_dir;
  std::vector<Tactic> tactics;  ///< --tactic, parsed (default none)
};

// `--mesh/--strategy`: the per-op placements the plan chose, the reshards it needed, and
// (with --emit) each device's lowered program.
int show_plan(const Graph& g, const ShowOptions& o) {
  const std::string mesh = o.mesh.empty() ? "1" : o.mesh;
  auto spec = search::requested_strategy(mesh, o.strategy);
  if (!spec.ok()) return user_error(spec.error());
  auto planned = search::plan_run(g, mesh, *spec, o.tactics);
  if (!planned.ok()) return user_error(planned.error());
  const ShardingPlan& plan = planned->propagation.plan;
  fmt::print("plan: {}\n\n{}", planned->note, plan.to_string(g));
  const auto& reshards = planned->propagation.reshards;
  fmt::print("\n{} reshard(s) inserted by propagation{}\n{}", reshards.size(),
             reshards.empty() ? "" : ":", planned->propagation.report(g));
  const std::string unsplit = planned->report.to_string(g, plan.mesh, static_cast<size_t>(o.limit));
  if (!unsplit.empty()) fmt::print("\nnot split:\n{}", unsplit);
  if (o.emit_dir.empty()) return 0;
  // One shared template; each device's program is instantiated, written and dropped in turn.
  auto programs = lower_template(g, plan);
  if (!programs.ok()) return user_error(programs.error());
  if (auto s = write_programs(o.emit_dir, g, *programs); !s.ok()) return user_error(s.error());
  fmt::print("wrote {} device programs to {}\n", plan.mesh.num_devices(), o.emit_dir);
  return 0;
}

void print_zoo_list() {
  fmt::print("{:<18} {:<8} {}\n", "model", "family", "description");
  for (const auto& e : zoo::zoo_entries())
    fmt::print("{:<18} {:<8} {}\n", e.name, e.family, e.description);
}

Status write_file(const std::string& path, const std::string& text) {
  return write_file_atomic(path, text);
}

nlohmann::json value_list(const Graph& g, const std::vector<ValueId>& ids) {
  nlohmann::json a = nlohmann::json::array();
  for (ValueId v : ids) a.push_back({{"name", g.value(v).name}, {"type", g.type(v).to_string()}});
  return a;
}

void print_summary(const Graph& g, const GraphStats& s, int limit) {
  fmt::print("graph {}{}\n", g.name(), g.source_file().empty() ? "" : " (" + g.source_file() + ")");
  fmt::print("  ops          {}\n", s.ops);
  fmt::print("  tensors      {}\n", s.tensors);
  fmt::print("  parameters   {} ({})\n", human_count(static_cast<double>(s.parameters)),
             human_bytes(static_cast<double>(s.parameter_bytes)));
  fmt::print("  activations  {}\n", human_bytes(static_cast<double>(s.activation_bytes)));
  fmt::print("  FLOPs        {}\n", human_count(s.flops));
  for (ValueId v : g.inputs())
    fmt::print("  input        {}: {}\n", value_ref(g.value(v).name), g.type(v).to_string());
  const size_t kMaxOutputs = 8;  // training graphs output every updated parameter
  for (size_t i = 0; i < g.outputs().size() && i < kMaxOutputs; ++i)
    fmt::print("  output       {}: {}\n", value_ref(g.value(g.outputs()[i]).name),
               g.type(g.outputs()[i]).to_string());
  if (g.outputs().size() > kMaxOutputs)
    fmt::print("  output       ... {} more\n", g.outputs().size() - kMaxOutputs);

  std::map<std::string, int64_t> kinds;
  for (const Op& op : g.ops()) ++kinds[std::string(op_kind_name(op.kind))];
  std::vector<std::string> parts;
  for (const auto& [k, n] : kinds) parts.push_back(k + " x" + std::to_string(n));
  if (!parts.empty()) fmt::print("  op kinds     {}\n", join(parts, ", "));

  fmt::print("\n{:<8} {:<28} {:<24} {:>12}\n", "role", "tensor", "type", "bytes");
  int64_t listed = 0;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      if (listed++ >= limit) continue;
      fmt::print("{:<8} {:<28} {:<24} {:>12}\n", value_role_name(g.value(v).role),
                 value_ref(g.value(v).name), g.type(v).to_string(),
                 human_bytes(static_cast<double>(g.type(v).bytes())));
    }
  if (listed > limit)
    fmt::print("... {} more inputs and params\n",
               static_cast<int64_t>(g.inputs().size() + g.params().size()) - limit);

  fmt::print("\n{:<5} {:<14} {:<20} {:<24} {:>10}  {}\n", "#", "op", "result", "type", "FLOPs",
             "index space");
  int64_t shown = 0;
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (shown == limit) {
      fmt::print("... {} more ops (--limit N shows more, --text FILE writes them all)\n",
                 g.num_ops() - shown);
      break;
    }
    const Op& op = g.op(i);
    ValueId r = op.results.empty() ? -1 : op.results[0].value;
    fmt::print("{:<5} {:<14} {:<20} {:<24} {:>10}  {}\n", i, op_kind_name(op.kind),
               r < 0 ? "" : value_ref(g.value(r).name), r < 0 ? "" : g.type(r).to_string(),
               human_count(op_cost(g, i).flops), op.space.to_string());
    ++shown;
  }
}

}  // namespace

namespace {

int run_show(const ShowOptions& o) {
  if (o.list) {
    print_zoo_list();
    return 0;
  }
  if (o.model.empty())
    return user_error(Diagnostic("give a MODEL (a zoo name or a file), or --list"));
  zoo::ModelOptions mo;
  mo.with_loss = o.train;
  auto parsed = model::load_graph(
      {.source = o.model, .overrides = o.overrides, .options = mo, .dims = o.dims, .loss = o.loss});
  if (!parsed.ok()) return user_error(parsed.error());
  if (o.train) {
    auto step = build_train_step(*parsed);
    if (!step.ok()) return user_error(step.error());
    parsed = std::move(step->graph);
  }
  const Graph& g = *parsed;
  if (report_verify(g)) return 1;
  const bool plan =
      !o.mesh.empty() || !o.strategy.empty() || !o.emit_dir.empty() || !o.tactics.empty();
  if (plan && o.json)  // the plan is text only; --json used to be ignored silently
    return user_error(Diagnostic(
        "--json prints the graph's summary; with --mesh, --strategy or --emit, show prints the "
        "plan as text: drop --json (or the plan's options)"));
  if (!o.dot_file.empty())
    if (auto s = write_file(o.dot_file, to_dot(g)); !s.ok()) return user_error(s.error());
  if (!o.text_file.empty())
    if (auto s = write_file(o.text_file, print_graph(g)); !s.ok()) return user_error(s.error());
  if (plan) return show_plan(g, o);
  GraphStats s = graph_stats(g);
  s.flops = graph_flops(g);
  if (o.json) {
    nlohmann::json j = {{"graph", g.name()},
                        {"ops", s.ops},
                        {"tensors", s.tensors},
                        {"parameters", s.parameters},
                        {"parameter_bytes", s.parameter_bytes},
                        {"activation_bytes", s.activation_bytes},
                        {"flops", s.flops},
                        {"inputs", value_list(g, g.inputs())},
                        {"outputs", value_list(g, g.outputs())}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  print_summary(g, s, o.limit);
  return 0;
}

}  // namespace

Command add_show_command(CLI::App& root) {
  auto opts = std::make_shared<ShowOptions>();
  auto* app = root.add_subcommand(
      "show", "Summarize a model: ops, tensors, parameters, FLOPs and a table of its ops.");
  app->add_option("MODEL", opts->model,
                  "A zoo name (see --list), an ONNX file (.onnx) or a text-IR file (.hd)");
  app->add_flag("--list", opts->list, "List the zoo's models");
  app->add_flag("--train", opts->train,
                "Show the training step: forward, loss, backward and AdamW update");
  add_zoo_overrides(app, opts->overrides);
  add_dim_option(app, opts->dims);
  add_loss_option(app, opts->loss);
  app->add_option("--dot", opts->dot_file, "Write the graph as Graphviz DOT to FILE");
  app->add_option("--text", opts->text_file, "Write the graph in heddle's text form to FILE");
  app->add_flag("--json", opts->json, "Print one JSON object instead of the text summary");
  app->add_option("--mesh", opts->mesh, "Show the plan for this mesh (4, 2x2, dp=2,tp=2)");
  app->add_option("--strategy", opts->strategy, "Show the plan for this strategy (dp=2,tp=2,...)");
  app->add_option("--emit", opts->emit_dir, "With --mesh: write each device's program to DIR");
  add_tactic_option(app, opts->tactics);
  app->add_option("--limit", opts->limit, "Rows of the op table to print (default 40)")
      ->check(CLI::NonNegativeNumber);
  return {app, [opts] { return run_show(*opts); }};
}

}  // namespace heddle::cli
