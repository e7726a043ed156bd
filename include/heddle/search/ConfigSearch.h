// The inter-op and parallel-configuration search behind `heddle plan`: every combination of
// tensor, pipeline and data parallel degrees, micro-batch size, pipeline schedule, ZeRO stage and
// recomputation that the cluster and model allow, each simulated; the best that fits wins. The
// most promising layouts are then re-planned inside each stage by the intra-op ILP priced with
// the cost model, which keeps whichever stage plan simulates faster.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"

namespace heddle::search {

/// What "best" means.
enum class Objective : uint8_t {
  kTime,    ///< the shortest step
  kEnergy,  ///< the least energy per step (devices' busy and idle power)
};

/// Options of search_configs().
struct ConfigSearchOptions {
  bool train = false;  ///< plan a training step (default: inference)
  /// Every simulation overlaps gradient reduction and stage sends with compute
  /// (SimulateOptions::overlap); default off.
  bool overlap = false;
  StrategySpec pins;                       ///< degrees and settings the user fixed (`auto,pp=8`)
  double time_limit_s = 60;                ///< stop and return the best so far; default 60 s
  Objective objective = Objective::kTime;  ///< default: time
  /// > 0: plans may use fewer devices than the cluster: every power of two up to this and this
  /// itself (at most the cluster's count). Default 0: exactly the cluster's devices.
  int64_t max_devices = 0;
  /// > 0: the smallest device count (as max_devices lists them, up to max_devices or the
  /// cluster's count) whose best plan's step takes at most this many seconds. Default 0: off.
  double target_step_time_s = 0;
  /// Re-plan the `intra_op_layouts` best layouts with the intra-op ILP; default on, 8 layouts.
  bool intra_op = true;
  int64_t intra_op_layouts = 8;
  /// Give the `split_layouts` best pipelined layouts an uneven layer split (balance_layers() on
  /// their simulated chunk costs), kept when it simulates better; default 4, 0: even splits only.
  int64_t split_layouts = 4;
  /// Give the `submesh_layouts` best pipelined layouts (1f1b or zb-h1, tactics stage plans) the
  /// inter-op DP's per-stage sub-meshes and layer split (submesh_candidate()), kept when it
  /// simulates better and fits; default 2, 0: equal sub-meshes only. On a mixed cluster, the
  /// stages that follow the device kinds (kind_stage_candidates()) instead.
  int64_t submesh_layouts = 2;
  /// Try sequence parallelism (sp=on, at the layout's recomputation level or a lighter one) on
  /// the `sp_layouts` best tensor-parallel layouts, kept when it simulates better and fits;
  /// default 4, 0: sp only when pinned. Pinned `sp` is used everywhere instead.
  int64_t sp_layouts = 4;
  /// Keeps the search to strategies a stack can execute (`plan --target`): called with each
  /// candidate's strategy and whether the intra-op ILP plans its stages, before it is simulated;
  /// false drops it. Default null: every strategy.
  std::function<bool(const StrategySpec& spec, bool intra_op_stages)> admits;
  /// Called after each simulated configuration with (done, total); default none.
  std::function<void(int64_t, int64_t)> progress;
};

/// One evaluated configuration.
struct ConfigResult {
  StrategySpec spec;
  cost::SimulationResult sim;
  std::string stage_planner = "tactics";  ///< `tactics` (propagation) or `intra-op ILP`
};

/// What the intra-op ILPs of a search did.
struct IlpStats {
  int64_t solves = 0;     ///< ILPs solved
  int64_t variables = 0;  ///< columns of the largest
  bool optimal = true;    ///< every one proven optimal
};

/// The search's answer.
struct ConfigSearch {
  ConfigResult best;                  ///< best feasible configuration under the objective
  ConfigResult fastest, greenest;     ///< shortest step and least energy, for the trade-off
  std::vector<ConfigResult> ranking;  ///< feasible configurations, best first (up to 10)
  int64_t evaluated = 0;   ///< configurations simulated (the others were dominated or cut off)
  int64_t candidates = 0;  ///< configurations the space holds
  IlpStats ilp;            ///< the intra-op ILPs run
  bool complete = true;    ///< false when the time limit cut the search short
  std::vector<int64_t> device_counts;  ///< device counts searched
  double search_time_s = 0;
};

/// Simulation options whose stage planner is the intra-op ILP: tactic pins (axis roles, the batch
/// on dp, ZeRO-3 parameters), every op's strategy chosen by plan_intra_op() priced by the cost
/// model on the stage's own device kind (the cluster the simulator gives the planner: on a mixed
/// cluster each stage's kind, with the step's techniques) with the two-layer graph folded to the
/// model's layers, then propagation with every op pinned to list the reshards the simulator
/// charges. `stats` (may be null) counts the solves. `model` and `stats` must outlive the options;
/// `cluster` is the cluster simulated (not used by the planner since it prices per stage).
cost::SimulateOptions intra_op_simulate_options(const model::ScalableModel& model,
                                                const cost::Cluster& cluster, bool train,
                                                double time_limit_s, IlpStats* stats);

/// Searches the configuration space. First, each layout's lightest-memory setting until one fits
/// (kept only if the time limit leaves the full pass without a fit). Within a layout (tp, pp not
/// necessarily dividing the layers, dp, micro-batch, schedule) every ZeRO stage is tried with the
/// least recomputation that fits (ZeRO-3 only with less than ZeRO-2 needed: otherwise it cannot
/// be faster). Then the ILP stage plans, uneven layer splits and (training) per-stage sub-meshes
/// of the best, each kept only when it simulates faster. The intra-op phase gets 15% of the time
/// limit. Nothing fits: a diagnostic "no plan fits in X per device; the smallest found needs Y
/// (strategy ...)"; a step-time target no device count reaches says the fastest found.
/// Deterministic for equal inputs (up to the time limit).
Result<ConfigSearch> search_configs(const model::ScalableModel& model, const cost::Cluster& cluster,
                                    const ConfigSearchOptions& options = {});

}  // namespace heddle::search
