// A runtime session: a plan's programs (one SPMD program per device, or a pipeline) run for N
// steps, forward or training, with the reference check, per-step times and the outputs and
// losses. The one step loop every backend uses is run_steps(); Session drives it on threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/PipelineExecutor.h"
#include "heddle/runtime/PipelineProgram.h"
#include "heddle/runtime/ReferenceCheck.h"
#include "heddle/runtime/SequenceLayout.h"
#include "heddle/runtime/ThreadedRunner.h"

namespace heddle {

/// One step of a backend: runs step `step` (1-based) and makes its own feeds follow the
/// parameter updates for the next; returns every output of the graph (whole), or nullopt on a
/// process that holds none (an MPI rank other than 0 of a pipeline).
using StepFn = std::function<Result<std::optional<TensorMap>>(int step)>;

/// What run_steps() does around each step.
struct StepLoopOptions {
  int steps = 1;  ///< the last step to run, >= first_step. Default 1.
  /// The first step to run (1-based): a resumed run starts after its checkpoint's step. Default 1.
  int first_step = 1;
  bool train = false;  ///< the graph is a training step: outputs()[0] is the loss. Default false.
  /// Ring attention's exchanges posted to overlap the block kernels (ExecOptions::overlap_ring);
  /// false: each exchange blocks before the block kernel it would overlap (`heddle run
  /// --no-ring-overlap`). Default true.
  bool overlap_ring = true;
  /// Passed to every device's executor as ExecOptions::on_ring_event (called on the devices'
  /// threads, concurrently). Default unset.
  std::function<void(const RingEvent&)> on_ring_event = nullptr;
  /// Times every instruction of the SPMD programs (Session::instr_times()) in the steps after
  /// the first, which sets up (a run of one step times that step). Pipelines ignore it. Default
  /// false.
  bool profile = false;
  /// Checks each training step (a forward-only run: the first step, the others repeat the same
  /// computation) and follows the updates. Default none. Not owned.
  ReferenceCheck* reference = nullptr;
  /// Called after each step that returned outputs, with its number and the outputs (progress
  /// printing). Default none.
  std::function<void(int step, const TensorMap& outputs)> on_step;
  /// Called by the backend on every process after training step `step` moved its feeds to the
  /// updated parameters and optimizer state, with those feeds (whole on threads, the process's
  /// tiles under MPI): the checkpoint hook (Checkpoint.h). A diagnostic fails the step. Default
  /// none.
  std::function<Status(int step, const TensorMap& feeds)> after_update;
};

/// True when step `step` of `loop` is timed (StepLoopOptions::profile): every step after the
/// first, or the only step of a one-step run. Both backends' step loops ask this.
bool profiled_step(int step, const StepLoopOptions& loop);

/// What a run of steps gives back.
struct RunResult {
  TensorMap outputs;                 ///< the last step's outputs (empty where none were held)
  std::vector<double> losses;        ///< per step, training only
  std::vector<double> step_times_s;  ///< wall time of every step, in order
  /// CPU time of this process (user + system, every thread) during every step, in order: what a
  /// step costs without the share of the cores other jobs took (under MPI, this rank's).
  std::vector<double> step_cpu_s;
  /// The sum of step_times_s.
  double wall_time_s() const;
  /// The median of step_times_s (the mean of the middle two for an even count; 0 when empty).
  double median_step_s() const;
  /// The median of step_cpu_s, as median_step_s.
  double median_step_cpu_s() const;
  /// The 1-based step whose loss is the first NaN or infinity (a diverged run); none if all are
  /// finite.
  std::optional<size_t> first_nonfinite_loss() const;
};

/// The step loop: times each `step`, checks it against `options.reference`, records the loss.
/// Diagnostics: the step's and the reference's.
Result<RunResult> run_steps(const Graph& g, const StepFn& step, const StepLoopOptions& options);

/// A plan's programs on threads of this process.
class Session {
 public:
  /// One program per device of one mesh, in device order, lowered from `g` (the model or its
  /// training step, whose `updates` these are; empty for forward-only).
  /// Precondition: `g` outlives the session.
  /// With a `layout` not in order (zigzag_layout()), the programs run `g` on the sequence in
  /// that order: they must be lowered from with_layout(g, layout), the feeds are permuted into
  /// it and the outputs back (the session's own feeds and results stay in the sequence's order).
  Session(const Graph& g, std::vector<ParamUpdate> updates, std::vector<DeviceProgram> programs,
          SequenceLayout layout = {});
  /// A pipeline built from `g`'s model (build_pipeline); its feeds are packed from `g`'s and its
  /// results unpacked to `g`'s outputs. Precondition: `g` outlives the session.
  Session(const Graph& g, std::vector<ParamUpdate> updates, PipelineProgram pipeline);

  /// Runs `options.steps` steps from `feeds` (every parameter and input of `g` by id); training
  /// steps start from the previous step's updated parameters and optimizer state.
  Result<RunResult> run(TensorMap feeds, const StepLoopOptions& options);

  /// The graph the session runs.
  const Graph& graph() const { return g_; }
  /// The order the SPMD programs hold the sequence in.
  const SequenceLayout& layout() const { return layout_; }
  /// The pipeline, when the session runs one.
  const std::optional<PipelineProgram>& pipeline() const { return pipeline_; }
  /// The SPMD programs (empty for a pipeline).
  const std::vector<DeviceProgram>& programs() const { return programs_; }
  /// Per device, the peak bytes of tiles it holds: the executor's planned arena once a run has
  /// compiled it (SPMD programs), else the estimate from replaying the programs (HostMemory.h),
  /// which needs no memory.
  std::vector<int64_t> peak_bytes_per_device() const;
  /// Per device of the SPMD programs, the instruction times of the steps run with
  /// StepLoopOptions::profile (empty entries before any).
  const std::vector<InstrTimes>& instr_times() const { return times_; }

 private:
  /// The one call into the executor, per step (`optimizer_step`, `feeds_unchanged` and `times`
  /// as ExecOptions takes them).
  Result<TensorMap> execute(const TensorMap& feeds, int64_t optimizer_step, bool feeds_unchanged,
                            const StepLoopOptions& loop, std::vector<InstrTimes>* times);
  /// What ExecOptions::instr_times is for step `step` of `loop`: times_ when it is profiled.
  std::vector<InstrTimes>* times_for(int step, const StepLoopOptions& loop);
  /// run() for training SPMD programs: each step's outputs land in buffers kept across steps (no
  /// allocation or page faults after the first step), the updated parameters and optimizer state
  /// move into the feeds by swapping buffers instead of copying, and the step loop sees views of
  /// them (its last step's outputs are returned as owning copies).
  Result<RunResult> train_in_place(TensorMap feeds, const StepLoopOptions& options);

  const Graph& g_;
  SequenceLayout layout_;
  std::optional<Graph> laid_out_;  // g_ with the layout's positional attributes, when permuted
  std::vector<ParamUpdate> updates_;
  std::vector<DeviceProgram> programs_;
  std::optional<PipelineProgram> pipeline_;
  /// The SPMD programs' executor, built by the first run and kept (threads, memory plans).
  std::unique_ptr<ThreadedRunner> runner_;
  std::unique_ptr<PipelineRunner> pipeline_runner_;  // made at the first step, kept after
  std::vector<InstrTimes> times_;                    // instr_times(), one per SPMD program
};

}  // namespace heddle
