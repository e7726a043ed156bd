// `heddle show`: what a model is: ops, tensors, parameters, FLOPs, a shape table; exports to the
// text form, Graphviz DOT and JSON.
#include <fmt/format.h>

#include <map>
#include <memory>

#include "Command.h"
#include "heddle/driver/RunRequest.h"
#include "heddle/ir/DotExport.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/model/ModelSummary.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ProgramFiles.h"
#include "heddle/search/RunPlan.h"
#include "heddle/support/AtomicFile.h"

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
  fmt::print("\n{} reshard(s) between the plan's ops{}\n{}", reshards.size(),
             reshards.empty() ? "" : ":", planned->propagation.report(g));
  const std::string unsplit = planned->report.to_string(g, plan.mesh, static_cast<size_t>(o.limit));
  if (!unsplit.empty()) fmt::print("\nnot split:\n{}", unsplit);
  if (o.emit_dir.empty()) return 0;
  // One shared template; each device's program is instantiated, written and dropped in turn.
  // The sequence in the order `run` holds it (cp_layout).
  auto layout = driver::sequence_layout(g, planned->spec);
  if (!layout.ok()) return user_error(layout.error());
  auto programs = lower_template(with_layout(g, *layout), plan, driver::thread_lowering());
  if (!programs.ok()) return user_error(programs.error());
  if (auto s = write_programs(o.emit_dir, g, *programs); !s.ok()) return user_error(s.error());
  fmt::print("wrote {} device programs to {}\n", plan.mesh.num_devices(), o.emit_dir);
  return 0;
}

int run_show(const ShowOptions& o) {
  if (o.list) {
    fmt::print("{}", model::zoo_list_text());
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
    if (auto s = write_file_atomic(o.dot_file, to_dot(g)); !s.ok()) return user_error(s.error());
  if (!o.text_file.empty())
    if (auto s = write_file_atomic(o.text_file, print_graph(g)); !s.ok())
      return user_error(s.error());
  if (plan) return show_plan(g, o);
  if (o.json)
    fmt::print("{}\n", model::summary_json(g).dump(2));
  else
    fmt::print("{}", model::summary_text(g, o.limit));
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
