// `heddle run`: executes a model. This file covers `--mesh 1`: the single-device reference
// interpreter, for inference or (`--train`) a synthetic training run that prints the loss per
// step. Multi-device execution belongs to the runtime.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "Command.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

namespace {

struct RunOptions {
  std::string model;
  std::string mesh;
  std::string strategy;
  bool train = false;
  int steps = 10;
  double lr = 1e-2;
  std::string optimizer = "adamw";
  uint64_t seed = 0;
  bool json = false;
  zoo::ZooOverrides overrides;
};

constexpr int64_t kMaxReferenceElements = int64_t{200} * 1000 * 1000;

// The largest integer every integer input may take: vocabulary sizes and class counts.
int64_t integer_range(const Graph& g) {
  int64_t hi = 1 << 30;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kEmbedding) hi = std::min(hi, g.type(op.inputs[1].value).shape()[0]);
    if (op.kind == OpKind::kCrossEntropy) {
      const IVec& s = g.type(op.inputs[0].value).shape();
      hi = std::min(hi, s[s.size() - 1]);
    }
  }
  return hi == (1 << 30) ? 2 : hi;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_run(const RunOptions& o) {
  if (o.mesh != "1")
    return user_error(Diagnostic("--mesh " + o.mesh +
                                 ": this build runs on one device only (--mesh 1, the reference "
                                 "interpreter); multi-device execution is not available yet"));
  if (o.steps < 1) return user_error(Diagnostic("--steps must be >= 1"));
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    return user_error(Diagnostic("--optimizer must be adamw or sgd, got '" + o.optimizer + "'"));
  zoo::ModelOptions mo;
  mo.with_loss = o.train;
  auto model = resolve_model(o.model, o.overrides, mo);
  if (!model.ok()) return user_error(model.error());
  GraphStats stats = graph_stats(*model);
  int64_t elements = stats.parameters + stats.activation_bytes / 4;
  if (elements > kMaxReferenceElements)
    return user_error(Diagnostic(
        "model '" + o.model + "' needs " + human_bytes(static_cast<double>(elements) * 4) +
        " on the single-device reference; pick a smaller preset or shrink it with --layers, "
        "--hidden, --seq, --batch"));
  Graph graph = std::move(*model);
  std::vector<ParamUpdate> updates;
  if (o.train) {
    TrainStepOptions to;
    to.optimizer = o.optimizer == "sgd" ? TrainStepOptions::Optimizer::kSgdMomentum
                                        : TrainStepOptions::Optimizer::kAdamW;
    to.adamw.lr = o.lr;
    to.sgd.lr = o.lr;
    auto step = build_train_step(graph, to);
    if (!step.ok()) return user_error(step.error());
    graph = std::move(step->graph);
    updates = std::move(step->updates);
  }
  InterpreterOptions io;
  io.seed = o.seed;
  Interpreter it(graph, io);
  // The synthetic task: one fixed random batch (inputs and labels), learned by memorisation.
  auto inputs = random_inputs(graph, o.seed + 1, integer_range(graph));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> losses;
  int steps = o.train ? o.steps : 1;
  for (int s = 1; s <= steps; ++s) {
    auto r = it.run(inputs, s);
    if (!r.ok()) return user_error(r.error());
    if (o.train) {
      double loss = (*r)[0].f32()[0];
      losses.push_back(loss);
      if (!o.json) fmt::print("step {:>4}  loss {:.6f}\n", s, loss);
      size_t k = 1;
      for (const auto& u : updates) {
        it.set_param(u.param, (*r)[k++]);
        for (const auto& st : u.state) it.set_param(st.first, (*r)[k++]);
      }
    } else if (!o.json) {
      for (size_t i = 0; i < r->size(); ++i)
        fmt::print("output %{}: {}\n", graph.value(graph.outputs()[i]).name, (*r)[i].to_string());
    }
  }
  double wall = seconds_since(t0);
  if (o.json) {
    nlohmann::json j = {{"ok", true},           {"devices", 1},
                        {"wall_time_s", wall},  {"reference_time_s", wall},
                        {"max_abs_error", 0.0}, {"max_rel_error", 0.0}};
    if (o.train) j["loss"] = losses;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{} on 1 device (reference interpreter): {:.3f} s\n",
               o.train ? "trained " + std::to_string(steps) + " steps" : std::string("ran"), wall);
  }
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  auto* app =
      root.add_subcommand("run", "Execute a model (one device: the reference interpreter).");
  app->add_option("MODEL", opts->model, "A zoo name (heddle show --list) or a text-IR file")
      ->required();
  app->add_option("--mesh", opts->mesh, "Device mesh; this build supports 1")->required();
  app->add_option("--strategy", opts->strategy, "Parallel strategy (ignored on one device)");
  app->add_flag("--train", opts->train,
                "Train on a synthetic task (one fixed random batch) and print the loss per step");
  app->add_option("--steps", opts->steps, "Training steps (default 10)");
  app->add_option("--lr", opts->lr, "Learning rate (default 0.01)");
  app->add_option("--optimizer", opts->optimizer, "adamw (default) or sgd (with momentum)");
  app->add_option("--seed", opts->seed, "Seed of parameters and synthetic data (default 0)");
  app->add_flag("--json", opts->json, "Print one JSON object");
  add_zoo_overrides(app, opts->overrides);
  return {app, [opts] { return run_run(*opts); }};
}

}  // namespace heddle::cli
