// Planning a graph for a run: degrees, `auto` (the intra-op ILP priced for this machine) or
// propagation alone over the given mesh.
#include "heddle/search/RunPlan.h"

#include <fmt/format.h>

#include "heddle/cost/Cluster.h"
#include "heddle/search/IntraOp.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/support/Assert.h"
#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {

std::string join_ints(const std::vector<int64_t>& xs, const char* sep) {
  std::vector<std::string> parts;
  for (int64_t x : xs) parts.push_back(std::to_string(x));
  return join(parts, sep);
}

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

// An unnamed multi-axis `--mesh 2x2` given with degrees: the degrees must describe that shape
// (axes of size 1 aside), else the shape the user asked for would be silently replaced.
Status check_shape_agrees(const std::string& mesh_text, const Mesh& given, const Mesh& planned,
                          const StrategySpec& spec) {
  if (mesh_text.find('=') != std::string::npos) return {};
  std::vector<int64_t> want, got;
  for (const MeshAxis& a : given.axes())
    if (a.size > 1) want.push_back(a.size);
  if (want.size() <= 1) return {};  // a device count: the strategy arranges it
  for (const MeshAxis& a : planned.axes())
    if (a.size > 1) got.push_back(a.size);
  if (want == got) return {};
  return Diagnostic("--mesh " + mesh_text + " is a " + join_ints(want, " x ") +
                    " mesh, but --strategy " + spec.to_string() + " arranges its " +
                    std::to_string(given.num_devices()) + " devices as " + planned.to_string() +
                    "; give --mesh " + std::to_string(given.num_devices()) +
                    " to let the strategy arrange them, or degrees of that shape (outermost "
                    "first: pp, dp, ep, tp)");
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

Result<Pins> run_tactic_pins(const Graph& g, const Mesh& mesh, const std::vector<Tactic>& tactics) {
  std::vector<Tactic> all = graph_tactics(g);
  all.insert(all.end(), tactics.begin(), tactics.end());
  if (mesh.num_devices() == 1) all.clear();  // one device: nothing to split
  return apply_tactics(g, mesh, Pins{}, all);
}

Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text, const StrategySpec& spec,
                            const std::vector<Tactic>& cli_tactics) {
  auto given = Mesh::parse(mesh_text);
  if (!given.ok()) return Diagnostic("--mesh: " + given.error().message);
  PlannedRun r;
  r.spec = spec;
  std::vector<Tactic> tactics = graph_tactics(g);
  tactics.insert(tactics.end(), cli_tactics.begin(), cli_tactics.end());
  if (given->num_devices() == 1) tactics.clear();  // one device: nothing to split
  bool has_degrees = r.spec.dp || r.spec.tp || r.spec.pp || r.spec.ep || r.spec.cp;
  Pins pins;
  if (has_degrees) {
    auto mesh = r.spec.mesh(given->num_devices());
    HEDDLE_TRY(mesh);
    r.mesh = *mesh;
    HEDDLE_TRY(check_shape_agrees(mesh_text, *given, r.mesh, r.spec));
    auto preset = tactic_pins(g, r.mesh, r.spec);
    HEDDLE_TRY(preset);
    auto tacticed =
        apply_tactics(g, r.mesh, std::move(*preset), tactics, "--strategy " + r.spec.to_string());
    HEDDLE_TRY(tacticed);
    pins = std::move(*tacticed);
    auto p = plan_from_pins(g, r.mesh, pins);
    HEDDLE_TRY(p);
    r.propagation = std::move(*p);
    if (r.spec.ring_cp()) r.propagation.plan.ring_axis = r.mesh.find("cp");
    r.note = "strategy " + r.spec.to_string() + " on mesh " + r.mesh.to_string();
  } else if (r.spec.auto_search) {
    r.mesh = *given;
    // Tactics pin decisions, the ILP completes the rest.
    auto tacticed = run_tactic_pins(g, r.mesh, cli_tactics);
    HEDDLE_TRY(tacticed);
    pins = std::move(*tacticed);
    // Priced for this machine's devices: the calibrated `cpu` profile (or its fallback).
    auto cpu = cost::cpu_cluster();
    HEDDLE_TRY(cpu);
    cpu->count = r.mesh.num_devices();
    IntraOpOptions io;
    io.cluster = &*cpu;
    io.ilp.time_limit_s = 30;
    auto p = plan_intra_op(g, r.mesh, pins, CbcSolver(), io);
    HEDDLE_TRY(p);
    // The reshards between the ILP's strategies, listed as propagation lists its own: every
    // op pinned to the strategy the ILP chose, so propagation only walks the data movement.
    Pins chosen = pins;
    for (size_t id = 0; id < p->plan.ops.size(); ++id)
      chosen.ops[static_cast<OpId>(id)] = p->plan.ops[id];
    for (const auto& [v, s] : p->plan.pinned) chosen.values[v] = s;
    auto walked = propagate(g, r.mesh, chosen);
    HEDDLE_TRY(walked);
    HEDDLE_ASSERT(walked->plan.ops == p->plan.ops) << "propagation moved a strategy the ILP chose";
    r.propagation.reshards = std::move(walked->reshards);
    r.propagation.plan = std::move(p->plan);
    r.note = "auto: intra-op ILP (CBC, " + std::to_string(p->nodes) + " nodes, " +
             std::to_string(p->variables) + " variables, " +
             (p->optimal ? "optimal" : "time limit reached, not proven optimal") + ") over mesh " +
             r.mesh.to_string() + " priced for --cluster cpu (" + cpu->source + ")";
  } else {
    r.mesh = *given;
    auto tacticed = run_tactic_pins(g, r.mesh, cli_tactics);
    HEDDLE_TRY(tacticed);
    pins = std::move(*tacticed);
    auto p = propagate(g, r.mesh, pins);
    HEDDLE_TRY(p);
    r.propagation = std::move(*p);
    r.note = "propagation over mesh " + r.mesh.to_string();
  }
  if (!tactics.empty()) r.note += " with " + std::to_string(tactics.size()) + " tactic(s)";
  r.report = split_report(g, pins, r.propagation.plan);
  return r;
}

}  // namespace heddle::search
