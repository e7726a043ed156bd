#include "Planning.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "heddle/ir/Verifier.h"
#include "heddle/search/IntraOp.h"
#include "heddle/support/AtomicFile.h"

namespace heddle::cli {

Status runnable_strategy(StrategySpec& spec) {
  if (spec.heterogeneous())
    return Diagnostic(
        "--strategy " + spec.to_string() +
        ": pipeline stages on sub-meshes of different shapes (meshes=) are priced by plan and "
        "simulate, but run executes pipelines whose stages share one dp x tp mesh (every "
        "stage's program is lowered on the same stage mesh); simulate this plan, or run equal "
        "stages such as dp=..,tp=..,pp=" +
        std::to_string(spec.meshes.size()));
  if (!spec.meshes.empty()) {
    spec.dp = spec.meshes.front().dp;
    spec.tp = spec.meshes.front().tp;
    spec.meshes.clear();
  }
  return {};
}

Result<StrategySpec> requested_strategy(const std::string& mesh_text,
                                        const std::string& strategy_text) {
  std::string text = strategy_text;
  if (text.empty() && mesh_text.find('=') != std::string::npos) text = mesh_text;
  if (text.empty()) return StrategySpec{};
  auto spec = StrategySpec::parse(text);
  if (!spec.ok()) return Diagnostic("--strategy: " + spec.error().message);
  HEDDLE_TRY(runnable_strategy(*spec));
  return spec;
}

Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text,
                            const std::string& strategy_text) {
  auto spec = requested_strategy(mesh_text, strategy_text);
  HEDDLE_TRY(spec);
  return plan_run(g, mesh_text, *spec);
}

Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text,
                            const StrategySpec& spec) {
  auto given = Mesh::parse(mesh_text);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  PlannedRun r;
  r.spec = spec;
  bool has_degrees = r.spec.dp || r.spec.tp || r.spec.pp || r.spec.ep;
  if (has_degrees) {
    auto mesh = r.spec.mesh(given->num_devices());
    HEDDLE_TRY(mesh);
    r.mesh = *mesh;
    auto p = plan_from_strategy(g, r.mesh, r.spec);
    HEDDLE_TRY(p);
    r.propagation = std::move(*p);
    r.note = "strategy " + r.spec.to_string() + " on mesh " + r.mesh.to_string();
  } else if (r.spec.auto_search) {
    r.mesh = *given;
    // Priced for this machine's devices: the calibrated `cpu` profile (or its fallback).
    auto cpu = cost::cpu_cluster();
    HEDDLE_TRY(cpu);
    cpu->count = r.mesh.num_devices();
    search::IntraOpOptions io;
    io.cluster = &*cpu;
    io.ilp.time_limit_s = 30;
    auto p = search::plan_intra_op(g, r.mesh, Pins{}, search::CbcSolver(), io);
    HEDDLE_TRY(p);
    r.propagation.plan = std::move(p->plan);
    r.note = "auto: intra-op ILP (CBC, " + std::to_string(p->nodes) + " nodes, " +
             std::to_string(p->variables) + " variables, " +
             (p->optimal ? "optimal" : "time limit reached, not proven optimal") + ") over mesh " +
             r.mesh.to_string() + " priced for --cluster cpu (" + cpu->source + ")";
  } else {
    r.mesh = *given;
    auto p = propagate(g, r.mesh, Pins{});
    HEDDLE_TRY(p);
    r.propagation = std::move(*p);
    r.note = "propagation over mesh " + r.mesh.to_string();
  }
  return r;
}

namespace {

Status make_dir(const std::string& dir) { return make_dirs(dir); }

Status write_program(const std::string& dir, const Graph& g, const Mesh& mesh,
                     const DeviceProgram& p) {
  return write_file_atomic(dir + "/device" + std::to_string(p.device) + ".txt",
                           p.to_string(g, mesh));
}

}  // namespace

Status write_programs(const std::string& dir, const Graph& g, const Mesh& mesh,
                      const std::vector<DeviceProgram>& programs) {
  HEDDLE_TRY(make_dir(dir));
  for (const auto& p : programs) HEDDLE_TRY(write_program(dir, g, mesh, p));
  return {};
}

Status write_programs(const std::string& dir, const Graph& g, const ProgramTemplate& programs) {
  HEDDLE_TRY(make_dir(dir));
  for (int64_t d = 0; d < programs.mesh.num_devices(); ++d)
    HEDDLE_TRY(write_program(dir, g, programs.mesh, instantiate(g, programs, d)));
  return {};
}

int report_verify(const Graph& g) {
  auto diags = verify(g);
  const size_t kMax = 20;
  for (size_t i = 0; i < diags.size() && i < kMax; ++i)
    std::fprintf(stderr, "%s\n", diags[i].to_string().c_str());
  if (diags.size() > kMax) std::fprintf(stderr, "... and %zu more errors\n", diags.size() - kMax);
  return diags.empty() ? 0 : 1;
}

}  // namespace heddle::cli
