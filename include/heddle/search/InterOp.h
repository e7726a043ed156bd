// Alpa's inter-op search: a dynamic program that slices a model's layer clusters into pipeline
// stages and gives each stage a sub-mesh, with the micro-batch count and the pipeline schedule
// (1F1B, interleaved, zero-bubble) as choices and each stage's memory checked under its schedule.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/pipeline/PipelineSchedule.h"
#include "heddle/support/Result.h"

namespace heddle::search {

/// What one stage costs: layer clusters [first, last) on a sub-mesh of `devices` devices.
struct StageCost {
  double seconds = 0;           ///< forward + backward of one micro-batch
  double state_bytes = 0;       ///< weights, gradients and optimizer state per device
  double activation_bytes = 0;  ///< activations one micro-batch in flight keeps per device
  bool feasible = true;         ///< false: the sub-mesh cannot hold these layers at all
};

/// The inter-op problem.
struct InterOpProblem {
  int64_t layers = 0;                  ///< layer clusters, in order (>= 1)
  int64_t devices = 0;                 ///< the stages' sub-meshes use exactly this many
  std::vector<int64_t> submesh_sizes;  ///< device counts a stage may take
  std::vector<int64_t> micro_batches;  ///< micro-batch counts to choose from
  std::vector<pipeline::PipelineSchedule> schedules;  ///< 1F1B, interleaved:V or ZB-H1
  double memory_limit = 0;                            ///< bytes per device
  int64_t pinned_stages = 0;  ///< > 0: exactly this many stages (`auto,pp=8`)
  /// Prices a stage for a micro-batch count. Deterministic.
  std::function<StageCost(int64_t first, int64_t last, int64_t devices, int64_t micro_batches)>
      cost;
};

/// One stage of the answer.
struct InterOpStage {
  int64_t first = 0, last = 0, devices = 0;
  StageCost cost;
};

/// The answer.
struct InterOpPlan {
  std::vector<InterOpStage> stages;
  int64_t micro_batches = 1;
  pipeline::PipelineSchedule schedule;
  double step_time_s = 0;
};

/// Step time of a pipeline of stage times `t` over `m` micro-batches:
/// `m max(t) + b (sum(t) - max(t))`, where the bubble factor b is 1 for 1F1B, 1/V for
/// interleaved:V and 1/3 for zb-h1. Unknown schedules: a diagnostic listing the known ones.
Result<double> pipeline_step_time(const std::vector<double>& t, int64_t m,
                                  const pipeline::PipelineSchedule& schedule);

/// Micro-batches whose activations a stage keeps at its peak: with `s` stages from it to the last
/// (itself included), `min(m, s)` for 1F1B and zb-h1, `min(m, s + (s - 1) / V)` for
/// interleaved:V (Megatron's interleaved first stage holds p + (p - 1)/V).
double in_flight(int64_t s, int64_t m, const pipeline::PipelineSchedule& schedule);

/// The split of `units` layer units over the chunks of a pipeline whose largest chunk time is
/// least, chunk c taking `fixed[c] + n_c * unit_s` (its embedding, head and sends plus its units)
/// with every n_c >= 1; ties go to the earlier chunk (deterministic). Preconditions: `fixed` not
/// empty, `units >= fixed.size()`, `unit_s >= 0`.
std::vector<int64_t> balance_layers(const std::vector<double>& fixed, double unit_s, int64_t units);

/// balance_layers() with chunk c's units taking `unit_s[c]` each (stages on devices of different
/// speeds, mixed clusters). Preconditions as above, `unit_s` one per chunk.
std::vector<int64_t> balance_layers(const std::vector<double>& fixed,
                                    const std::vector<double>& unit_s, int64_t units);

/// Alpa's DP: for every schedule, micro-batch count and bound t_max on a stage's time, the
/// slicing of least total stage time whose stages all take at most t_max and fit in memory; the
/// best step time over all of them. No slicing fits: a diagnostic naming the least memory a
/// stage needed. Deterministic.
Result<InterOpPlan> solve_inter_op(const InterOpProblem& p);

/// The same answer by enumerating every slicing and sub-mesh assignment (small problems only,
/// for tests and baselines).
Result<InterOpPlan> enumerate_inter_op(const InterOpProblem& p);

}  // namespace heddle::search
