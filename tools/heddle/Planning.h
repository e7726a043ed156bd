// Turning `--mesh SHAPE --strategy S` into a sharding plan for a graph, and writing lowered
// programs, shared by `heddle run` and `heddle show`.
#pragma once

#include <string>
#include <vector>

#include "heddle/runtime/Program.h"
#include "heddle/runtime/ProgramTemplate.h"
#include "heddle/sharding/Tactics.h"

namespace heddle::cli {

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
};

/// The strategy `--mesh` and `--strategy` ask for (a named mesh doubles as the strategy); a
/// default StrategySpec when neither names one. Diagnostics name the option.
Result<StrategySpec> requested_strategy(const std::string& mesh_text,
                                        const std::string& strategy_text);

/// Plans `g` for `mesh_text` (`4`, `2x2`, `dp=2,tp=2`) and `strategy_text` (empty, `auto`, or the
/// strategy language). With degrees, the mesh takes the strategy's axis names and must have as
/// many devices; without them, propagation alone shards over the given axes.
Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text,
                            const std::string& strategy_text);

/// plan_run() for a strategy already parsed by requested_strategy().
Result<PlannedRun> plan_run(const Graph& g, const std::string& mesh_text, const StrategySpec& spec);

/// Writes `DIR/device<N>.txt` for every program. Errors name the path.
Status write_programs(const std::string& dir, const Graph& g, const Mesh& mesh,
                      const std::vector<DeviceProgram>& programs);

/// Writes `DIR/device<N>.txt` for every device of `programs`' mesh, instantiating one device's
/// program at a time (memory stays that of one program). Errors name the path.
/// Precondition: `programs` was lowered from `g`.
Status write_programs(const std::string& dir, const Graph& g, const ProgramTemplate& programs);

/// Prints every verifier diagnostic (up to 20) to stderr; returns 1 when there were any.
int report_verify(const Graph& g);

}  // namespace heddle::cli
