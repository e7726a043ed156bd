// `heddle run`: plan a model for a mesh, lower it to per-device programs, execute them on
// thread-devices, and (with --check) compare every output with the single-device interpreter.
#include "RunCommand.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "Command.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"

namespace heddle::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

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

Result<RunCheck> check_against_reference(const Graph& g, const RunOptions& o,
                                         const std::vector<Tensor>& inputs, const TensorMap& got) {
  RunCheck c;
  Interpreter interp(g, {.seed = o.seed, .blas_threads = 1});
  auto t1 = std::chrono::steady_clock::now();
  auto want = interp.run(inputs);
  c.reference_time_s = seconds_since(t1);
  if (!want.ok()) return want.error();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Tensor& a = (*want)[k];
    const Tensor& b = got.at(g.outputs()[k]);
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.is_int() ? a.i64()[i] : a.f32()[i];
      double y = b.is_int() ? b.i64()[i] : b.f32()[i];
      double err = std::fabs(x - y);
      if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
      c.max_abs = std::max(c.max_abs, err);
      c.max_rel = std::max(c.max_rel, err / std::max(std::fabs(x), 1e-6));
      if (err > o.atol + o.rtol * std::fabs(x)) c.ok = false;
    }
  }
  return c;
}

std::string output_digest(const Graph& g, const TensorMap& outputs) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ULL;
  };
  for (ValueId v : g.outputs()) {
    const Tensor& t = outputs.at(v);
    if (t.is_int())
      mix(t.i64(), static_cast<size_t>(t.numel()) * sizeof(int64_t));
    else
      mix(t.f32(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  return fmt::format("{:016x}", h);
}

int report_run(const RunOptions& o, const Graph& g, const PlannedRun& planned,
               const std::vector<DeviceProgram>& programs, const std::string& devices_text,
               double wall, const TensorMap& outputs, const RunCheck* check) {
  const ShardingPlan& plan = planned.propagation.plan;
  ProgramStats stats = program_stats(g, programs);
  if (o.json) {
    nlohmann::json j = {{"ok", check == nullptr || check->ok},
                        {"devices", plan.mesh.num_devices()},
                        {"backend", o.backend},
                        {"mesh", plan.mesh.to_string()},
                        {"strategy", planned.spec.to_string()},
                        {"wall_time_s", wall},
                        {"collectives", stats.collectives},
                        {"reshards", planned.propagation.reshards.size()},
                        {"output_digest", output_digest(g, outputs)}};
    if (check) {
      j["max_abs_error"] = check->max_abs;
      j["max_rel_error"] = check->max_rel;
      j["reference_time_s"] = check->reference_time_s;
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops)\n", g.name(), g.num_ops());
    fmt::print("plan       {}\n", planned.note);
    fmt::print("devices    {}\n", devices_text);
    fmt::print(
        "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
        "fetches over all devices\n",
        stats.kernels, stats.fused, stats.collectives, stats.fetches);
    if (!planned.propagation.reshards.empty())
      fmt::print(
          "reshards   {} inserted by propagation (heddle show MODEL --mesh ... --strategy "
          "... lists them)\n",
          planned.propagation.reshards.size());
    fmt::print("wall time  {:.4f} s\n", wall);
    if (check) {
      fmt::print("reference  {:.4f} s (single-device interpreter)\n", check->reference_time_s);
      fmt::print("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n",
                 check->max_abs, check->max_rel, o.atol, o.rtol);
      fmt::print("check      {}\n",
                 check->ok ? "ok: every output matches the reference" : "MISMATCH");
    }
  }
  if (check && !check->ok) {
    std::fprintf(stderr,
                 "error: outputs differ from the reference beyond tolerance "
                 "(max abs %.3g, max rel %.3g)\n",
                 check->max_abs, check->max_rel);
    return 1;
  }
  return 0;
}

namespace {

int run(const RunOptions& o) {
  if (o.backend == "mpi") return run_mpi(o);
  if (o.backend != "threads")
    return user_error(Diagnostic("--backend " + o.backend + ": use 'threads' or 'mpi'"));
  auto model = resolve_model(o.model, o.overrides, {});
  if (!model.ok()) return user_error(model.error());
  const Graph& g = *model;
  if (report_verify(g)) return 1;
  auto planned = plan_run(g, o.mesh, o.strategy);
  if (!planned.ok()) return user_error(planned.error());
  const ShardingPlan& plan = planned->propagation.plan;
  auto programs = lower(g, plan);
  if (!programs.ok()) return user_error(programs.error());
  if (!o.emit_dir.empty())
    if (auto s = write_programs(o.emit_dir, g, plan.mesh, *programs); !s.ok())
      return user_error(s.error());

  TensorMap feeds;
  std::vector<Tensor> inputs = random_inputs(g, o.seed, integer_range(g));
  for (size_t i = 0; i < g.inputs().size(); ++i) feeds.emplace(g.inputs()[i], inputs[i]);
  for (ValueId p : g.params()) feeds.emplace(p, init_param(g.value(p).name, g.type(p), o.seed));

  auto t0 = std::chrono::steady_clock::now();
  auto got = run_threaded(g, *programs, feeds);
  double wall = seconds_since(t0);
  if (!got.ok()) return user_error(got.error());

  std::optional<RunCheck> check;
  if (o.check) {
    auto c = check_against_reference(g, o, inputs, *got);
    if (!c.ok()) return user_error(c.error());
    check = *c;
  }
  return report_run(o, g, *planned, *programs, std::to_string(plan.mesh.num_devices()) + " threads",
                    wall, *got, check ? &*check : nullptr);
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto opts = std::make_shared<RunOptions>();
  auto* app = root.add_subcommand(
      "run", "Partition a model over a mesh of thread-devices, execute it, and check it.");
  app->add_option("MODEL", opts->model, "A zoo name (heddle show --list) or a text-IR file")
      ->required();
  add_zoo_overrides(app, opts->overrides);
  app->add_option("--mesh", opts->mesh, "Devices: 4, 2x2 or named axes dp=2,tp=2 (default 1)");
  app->add_option("--strategy", opts->strategy,
                  "dp=N,tp=N,sp=on,zero=K (see CLI.md); default: propagation over the mesh");
  app->add_option("--backend", opts->backend,
                  "threads (default) or mpi (one process per device under mpirun; docs/mpi.md)");
  app->add_option("--timeout", opts->timeout_s,
                  "MPI backend: seconds a collective may wait for its peers (default 60)");
  app->add_flag("--check", opts->check,
                "Compare every output with the single-device interpreter; exit 1 on mismatch");
  app->add_option("--emit", opts->emit_dir, "Write each device's lowered program to DIR");
  app->add_option("--seed", opts->seed, "Seed of inputs and parameters (default 0)");
  app->add_flag("--json", opts->json, "Print one JSON object");
  return {app, [opts] { return run(*opts); }};
}

}  // namespace heddle::cli
