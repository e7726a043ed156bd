// Planning a graph for a run: degrees, `auto` (the intra-op ILP priced for this machine) or
// propagation alone over the given mesh.
#include "heddle/search/RunPlan.h"

#include <fmt/format.h>

#include "heddle/cost/Cluster.h"
#include "heddle/search/IntraOp.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {

// A named `--mesh dp=2,tp=2` given with `--strategy`: every parallel degree the two both speak of
// must agree (a degree one leaves out counts as 1), else the mesh would be silently ignored.
Status check_mesh_agrees(const std::string& mesh_text, const StrategySpec& spec) {
  if (mesh_text.find('=') == std::string::npos) return {};
  if (!spec.dp && !spec.tp && !spec.pp && !spec.ep && !spec.cp)
    return {};  // the mesh gives the axes
  auto named = StrategySpec::parse(mesh_text);
  if (!named.ok()) return {};  // axes other than dp/tp/pp/ep: the mesh's own check reports them
  std::vector<std::string> clashes;
  auto check = [&](const char* key, const std::optional<int64_t>& m,
                   const std::optional<int64_t>& s) {
    if (m.value_or(1) != s.value_or(1))
      clashes.push_back(fmt::format("{}={} in --mesh but {}={} in --strategy", key, m.value_or(1),
                                    key, s.value_or(1)));
  };
  check("dp", named->dp, spec.dp);
  check("tp", named->tp, spec.tp);
  check("pp", named->pp, spec.pp);
  check("ep", named->ep, spec.ep);
  check("cp", named->cp, spec.cp);
  if (clashes.empty()) return {};
  return Diagnostic("--mesh " + mesh_text + " conflicts with --strategy " + spec.to_string() +
                    ": " + join(clashes, ", ") +
                    "; give the degrees once (--mesh N --strategy ...) or make them agree");
}

}  // namespace

Status runnable_strategy(StrategySpec& spec) {
  // Sub-meshes of different shapes stay per stage (the pipeline runtime executes them); equal
  // ones are the plain dp x tp form.
  spec = spec.without_equal_meshes();
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
  if (text != mesh_text) HEDDLE_TRY(check_mesh_agrees(mesh_text, *spec));
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
  bool has_degrees = r.spec.dp || r.spec.tp || r.spec.pp || r.spec.ep || r.spec.cp;
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
    IntraOpOptions io;
    io.cluster = &*cpu;
    io.ilp.time_limit_s = 30;
    auto p = plan_intra_op(g, r.mesh, Pins{}, CbcSolver(), io);
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

}  // namespace heddle::search
