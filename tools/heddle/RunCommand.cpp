// `heddle run`: plan a model for a mesh, lower it to per-device programs, execute them on
// thread-devices, and (with --check) compare every output with the single-device interpreter.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "Command.h"
#include "Planning.h"
#include "heddle/frontend/Npy.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"

namespace heddle::cli {

namespace {

struct RunOptions {
  std::string model;
  zoo::ZooOverrides overrides;
  std::map<std::string, int64_t> dims;
  std::vector<std::string> input_files;
  std::string output_file;
  std::string mesh = "1";
  std::string strategy;
  std::string backend = "threads";
  std::string emit_dir;
  bool check = false;
  bool json = false;
  uint64_t seed = 0;
  double rtol = 1e-3;
  double atol = 1e-4;
};

// Integer inputs must index something: the smallest table or class count they feed.
int64_t integer_range(const Graph& g) {
  int64_t hi = 0;
  for (const Op& op : g.ops()) {
    int64_t n = 0;
    if (op.kind == OpKind::kEmbedding) n = g.type(op.inputs[1].value).shape()[0];
    if (op.kind == OpKind::kCrossEntropy) {
      const IVec& s = g.type(op.inputs[0].value).shape();
      n = s[s.size() - 1];
    }
    if (n > 0) hi = hi == 0 ? n : std::min(hi, n);
  }
  return hi == 0 ? 2 : hi;
}

// One tensor per graph input: from --input files (in graph-input order), else random.
Result<std::vector<Tensor>> read_inputs(const Graph& g, const RunOptions& o) {
  if (o.input_files.empty()) return random_inputs(g, o.seed, integer_range(g));
  if (o.input_files.size() != g.inputs().size())
    return Diagnostic("--input given " + std::to_string(o.input_files.size()) +
                      " time(s), but the model has " + std::to_string(g.inputs().size()) +
                      " input(s); give one .npy file per input, in order");
  std::vector<Tensor> out;
  for (size_t i = 0; i < o.input_files.size(); ++i) {
    auto t = read_npy(o.input_files[i]);
    HEDDLE_TRY(t);
    const TensorType& want = g.type(g.inputs()[i]);
    if (t->shape() != want.shape() || t->is_int() != !dtype_is_float(want.dtype()))
      return Diagnostic(SourceLoc{o.input_files[i], 0, 0},
                        "holds " + std::string(dtype_name(t->dtype())) + t->shape().to_string() +
                            ", but input '" + g.value(g.inputs()[i]).name + "' is " +
                            want.to_string());
    Tensor fixed(want);  // i32/bool files feed i64 inputs; storage is shared
    if (fixed.is_int())
      std::copy(t->i64(), t->i64() + t->numel(), fixed.i64());
    else
      std::copy(t->f32(), t->f32() + t->numel(), fixed.f32());
    out.push_back(std::move(fixed));
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const RunOptions& o) {
  if (o.backend != "threads")
    return user_error(
        Diagnostic("--backend " + o.backend + ": only 'threads' is available in this build"));
  auto model = load_model(o.model, o.overrides, {}, o.dims);
  if (!model.ok()) return user_error(model.error());
  const Graph& g = model->graph;
  if (report_verify(g)) return 1;
  if (!model->missing_weights.empty())
    return user_error(Diagnostic(
        SourceLoc{o.model, 0, 0},
        "weights are missing for " + std::to_string(model->missing_weights.size()) +
            " parameter(s) (first: '" + model->missing_weights[0] +
            "'); the file has no weight data (stripped, or external data not found). show, plan "
            "and simulate work without weights; run needs them"));
  auto inputs = read_inputs(g, o);
  if (!inputs.ok()) return user_error(inputs.error());
  auto planned = plan_run(g, o.mesh, o.strategy);
  if (!planned.ok()) return user_error(planned.error());
  const ShardingPlan& plan = planned->propagation.plan;
  auto programs = lower(g, plan);
  if (!programs.ok()) return user_error(programs.error());
  if (!o.emit_dir.empty())
    if (auto s = write_programs(o.emit_dir, g, plan.mesh, *programs); !s.ok())
      return user_error(s.error());

  TensorMap feeds;
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], (*inputs)[i]);
  for (ValueId p : g.params())
    feeds.emplace(p, model->from_onnx ? model->weights.at(p)
                                      : init_param(g.value(p).name, g.type(p), o.seed));

  auto t0 = std::chrono::steady_clock::now();
  auto got = run_threaded(g, *programs, feeds);
  double wall = seconds_since(t0);
  if (!got.ok()) return user_error(got.error());

  double max_abs = 0, max_rel = 0, ref_time = 0;
  bool ok = true;
  if (o.check) {
    Interpreter interp(g, {.seed = o.seed, .blas_threads = 1});
    for (ValueId p : g.params()) interp.set_param(p, feeds.at(p));
    auto t1 = std::chrono::steady_clock::now();
    auto want = interp.run(*inputs);
    ref_time = seconds_since(t1);
    if (!want.ok()) return user_error(want.error());
    for (size_t k = 0; k < g.outputs().size(); ++k) {
      const Tensor& a = (*want)[k];
      const Tensor& b = got->at(g.outputs()[k]);
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = a.is_int() ? a.i64()[i] : a.f32()[i];
        double y = b.is_int() ? b.i64()[i] : b.f32()[i];
        double err = std::fabs(x - y);
        if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
        max_abs = std::max(max_abs, err);
        max_rel = std::max(max_rel, err / std::max(std::fabs(x), 1e-6));
        if (err > o.atol + o.rtol * std::fabs(x)) ok = false;
      }
    }
  }
  if (!o.output_file.empty()) {
    if (g.outputs().size() != 1)
      return user_error(Diagnostic("--output takes one file, but the model has " +
                                   std::to_string(g.outputs().size()) + " outputs"));
    if (auto s = write_npy(o.output_file, got->at(g.outputs()[0])); !s.ok())
      return user_error(s.error());
  }
  ProgramStats stats = program_stats(g, *programs);
  if (o.json) {
    nlohmann::json j = {{"ok", ok},
                        {"devices", plan.mesh.num_devices()},
                        {"mesh", plan.mesh.to_string()},
                        {"strategy", planned->spec.to_string()},
                        {"wall_time_s", wall},
                        {"collectives", stats.collectives},
                        {"reshards", planned->propagation.reshards.size()}};
    if (o.check) {
      j["max_abs_error"] = max_abs;
      j["max_rel_error"] = max_rel;
      j["reference_time_s"] = ref_time;
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops)\n", g.name(), g.num_ops());
    fmt::print("plan       {}\n", planned->note);
    fmt::print("devices    {} threads\n", plan.mesh.num_devices());
    fmt::print(
        "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
        "fetches over all devices\n",
        stats.kernels, stats.fused, stats.collectives, stats.fetches);
    if (!planned->propagation.reshards.empty())
      fmt::print(
          "reshards   {} inserted by propagation (heddle show MODEL --mesh ... --strategy "
          "... lists them)\n",
          planned->propagation.reshards.size());
    fmt::print("wall time  {:.4f} s\n", wall);
    if (o.check) {
      fmt::print("reference  {:.4f} s (single-device interpreter)\n", ref_time);
      fmt::print("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n", max_abs,
                 max_rel, o.atol, o.rtol);
      fmt::print("check      {}\n", ok ? "ok: every output matches the reference" : "MISMATCH");
    }
  }
  if (!ok)
    std::fprintf(stderr,
                 "error: outputs differ from the reference beyond tolerance "
                 "(max abs %.3g, max rel %.3g)\n",
                 max_abs, max_rel);
  return ok ? 0 : 1;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  auto* app = root.add_subcommand(
      "run", "Partition a model over a mesh of thread-devices, execute it, and check it.");
  app->add_option("MODEL", opts->model,
                  "A zoo name (heddle show --list), an ONNX file (.onnx) or a text-IR file")
      ->required();
  add_zoo_overrides(app, opts->overrides);
  add_dim_option(app, opts->dims);
  app->add_option("--input", opts->input_files,
                  "An .npy file per graph input, in order (default: random inputs)")
      ->take_all();
  app->add_option("--output", opts->output_file,
                  "Write the (single) output of the partitioned run to FILE.npy");
  app->add_option("--mesh", opts->mesh, "Devices: 4, 2x2 or named axes dp=2,tp=2 (default 1)");
  app->add_option("--strategy", opts->strategy,
                  "dp=N,tp=N,sp=on,zero=K (see CLI.md); default: propagation over the mesh");
  app->add_option("--backend", opts->backend, "threads (default)");
  app->add_flag("--check", opts->check,
                "Compare every output with the single-device interpreter; exit 1 on mismatch");
  app->add_option("--emit", opts->emit_dir, "Write each device's lowered program to DIR");
  app->add_option("--seed", opts->seed, "Seed of inputs and parameters (default 0)");
  app->add_flag("--json", opts->json, "Print one JSON object");
  return {app, [opts] { return run(*opts); }};
}

}  // namespace heddle::cli
