// Planning a graph for a run: `--mesh SHAPE --strategy S` (degrees, `auto`, or neither) turned
// into a mesh and a sharding plan. `heddle run` and `heddle show` call it; `auto` prices the
// intra-op ILP for this machine's devices, which is why it lives in search.
#pragma once

#include <string>

#include "heddle/sharding/Propagate.h"
#include "heddle/sharding/SplitReport.h"
#include "heddle/sharding/StrategySpec.h"
#include "heddle/sharding/UserTactics.h"
#include "heddle/support/Result.h"

namespace heddle::search {

/// Makes `spec` one the runtime executes: equal per-stage sub-meshes (`meshes=2x2/2x2`) become
/// the plain dp/tp form; sub-meshes of different shapes stay per stage (the pipeline runtime
/// lowers each stage on its own sub-mesh).
Status runnable_strategy(StrategySpec& spec);

/// A plan for a run: the mesh (axes named after the strategy's degrees), the parsed strategy and
/// the propagated per-op strategies.
struct PlannedRun {
  Mesh mesh;
  StrategySpec spec;
  Propagation propagation;
  std::string note;  ///< how the plan was made, for people
  /// What the plan leaves unsplit and why, and the axes that split nothing (no silent fallback).
  SplitReport report;
};

/// The strategy `--mesh` and `--strategy` ask for (a named mesh doubles as the strategy); a
/// default StrategySpec when neither names one. Diagnostics name the option. The one parse of
/// the strategy text for run and show.
Result<StrategySpec> requested_strategy(const std::string& mesh_text,
                                        const std::string& strategy_text);

/// Plans `g` for `mesh_text` (`4`, `2x2`, `dp=2,tp=2`) and `strategy_text` (empty, `auto`, or the
/// strategy language). With degrees, the mesh takes the strategy's axis names and must have as
/// many devices; without them, propagation alone shards over the given axes.
Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text,
                            const std::string& strategy_text);

/// The pins of a run's tactics without a preset: `g`'s annotated tactics, then `tactics`,
/// applied by apply_tactics() for `mesh` (none on a single device). What plan_run() pins under
/// `auto` and without a strategy.
Result<Pins> run_tactic_pins(const Graph& g, const Mesh& mesh, const std::vector<Tactic>& tactics);

/// plan_run() for a strategy already parsed by requested_strategy(), with `tactics` (from
/// `--tactic`, each parsed by Tactic::parse) applied after the graph's own annotated tactics
/// (graph_tactics()) and the strategy's preset pins; conflicts name both sources. A mesh of a
/// single device ignores tactics (there is nothing to split). Under `auto` the tactics are pins
/// the intra-op ILP honours (PinnedChoices), the ILP choosing the rest. An unnamed multi-axis
/// `--mesh` (`2x2`) must have the shape the strategy's degrees give (`tp=4` on `2x2` is a
/// diagnostic, not a rename).
Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text, const StrategySpec& spec,
                            const std::vector<Tactic>& tactics = {});

}  // namespace heddle::search
