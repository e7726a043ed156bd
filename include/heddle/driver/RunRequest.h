// A run request: a loaded model turned into a plan, its programs (SPMD per device, or a pipeline),
// a runtime Session, its feeds and the reference check, run for N steps on thread-devices, with
// what its summary says. `heddle run` and `heddle.run` call these; they only parse and print.
// (A driver over model, search and runtime: the runtime itself never plans, so this sits above.)
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "heddle/model/LoadModel.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Checkpoint.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/PipelineRunPlan.h"
#include "heddle/runtime/ReferenceCheck.h"
#include "heddle/runtime/Session.h"
#include "heddle/sharding/SplitReport.h"
#include "heddle/sharding/StrategySpec.h"
#include "heddle/sharding/UserTactics.h"

namespace heddle::driver {

/// What a run is asked for, parsed (the CLI's flags, the Python keywords).
struct RunRequest {
  /// The model (its source also names the zoo preset a pipeline rebuilds at the micro-batch size,
  /// with its loss when `train`).
  model::ModelRequest model;
  std::string mesh = "1";  ///< `4`, `2x2`, `dp=2,tp=2` (default 1)
  std::string strategy;    ///< strategy text, `auto`, or empty (default: propagation)
  /// `threads` (default) or `mpi`: pipelines on sub-meshes of different shapes need threads.
  std::string backend = "threads";
  bool train = false;  ///< training steps (the model carries its loss); default forward only
  bool check = false;  ///< compare with the single-device interpreter; default off
  int steps = -1;      ///< total steps; -1 (default): 10 with train, else 1
  /// The optimizer of training steps (default: TrainStepOptions, AdamW).
  TrainStepOptions optimizer;
  uint64_t seed = 0;     ///< parameters from seed, random inputs from seed + 1 (default 0)
  double rtol = 1e-3;    ///< relative tolerance of the check (default 1e-3)
  double atol = 1e-4;    ///< absolute tolerance of the check (default 1e-4)
  std::string emit_dir;  ///< write each device's SPMD program here (default none)
  /// Training checkpoints (RunCheckpoints.h): written to `checkpoint_dir` after every
  /// `checkpoint_every`-th step (>= 1; default none, every step); the run continues from the
  /// latest in `resume_dir` (default none: from step 1).
  std::string checkpoint_dir;
  int checkpoint_every = 1;
  std::string resume_dir;
  /// `--tactic`s, parsed, applied after the model's own annotated tactics (default none).
  std::vector<Tactic> tactics;
  /// Ring attention's exchanges overlap the block kernels (StepLoopOptions::overlap_ring);
  /// false runs each after the kernel before it. Default true.
  bool overlap_ring = true;
  /// Time every instruction of device 0's program in the steps after the first and report them
  /// grouped by kernel (RunSummary::profile); SPMD runs, on threads or MPI ranks (rank 0's
  /// program). Default off.
  bool profile = false;
};

/// The steps to run: `steps`, or 10 with train and 1 without.
int steps_of(const RunRequest& r);

/// The optimizer `name` (adamw or sgd) with learning rate `lr`. Precondition: a known name.
TrainStepOptions optimizer_options(const std::string& name, double lr);

/// A request made ready to run on any backend: the graph to run (the training step with its
/// gradients as extra outputs when checking), the strategy parsed once, the pipeline when pp > 1.
struct PreparedRun {
  Graph graph;
  std::map<ValueId, Tensor> weights;  ///< ONNX parameter data (others are generated)
  StrategySpec spec;
  std::optional<PipelinePlan> pipe;
  std::vector<ParamUpdate> updates;  ///< training only
  size_t model_outputs = 0;          ///< the model's own outputs, before any gradient
};

/// Without pipeline stages, keys a run cannot honour are diagnostics naming them: `recompute`
/// other than none (the run keeps every activation), `schedule` other than the default 1f1b
/// (which plan prints for pp=1), and `mb` / `microbatches` giving more than one micro-batch of
/// `full`'s batch (no gradient accumulation without pp).
Status check_unpipelined_keys(const Graph& full, const StrategySpec& spec);

/// The pipeline `spec` asks for (pp > 1) for `full` (the model at its batch; with its loss for
/// training), planned by the runtime's plan_pipeline_run(); nothing when it asks for none (after
/// check_unpipelined_keys()). `emit_dir` with pp is a diagnostic (stage programs are not
/// written). Tactics (the model's annotations, then the request's) are pinned in every stage of
/// more than one device, next to the stage strategy's presets. `recompute` is executed as given;
/// sub-meshes of different shapes run on threads only.
Result<std::optional<PipelinePlan>> pipeline_if_asked(const RunRequest& r, const Graph& full,
                                                      const StrategySpec& spec);

/// The order an SPMD run of `g` with `spec` holds the sequence in (runtime/SequenceLayout.h):
/// zigzag (causal load balancing) when cp > 1, `cp_layout` is not `contiguous` and the graph has
/// a causal mask or rotary embedding over its sequence; in order otherwise. Where zigzag cannot
/// run, an explicit `cp_layout=zigzag` is a diagnostic with the reason (the default falls back
/// to the contiguous split): a graph zigzag_layout() refuses, pipeline stages (pp > 1), and
/// `mpi_checkpoints` (checkpoints written under MPI, whose tiles would be saved in zigzag order).
Result<SequenceLayout> sequence_layout(const Graph& g, const StrategySpec& spec,
                                       bool mpi_checkpoints = false);

/// How a run on threads lowers its SPMD programs (what `heddle show --emit` prints): outputs
/// left sharded (LowerOptions::replicate_outputs off), since the ThreadedRunner assembles them
/// from the devices' tiles in shared memory. MPI ranks lower with the defaults.
LowerOptions thread_lowering();

/// sequence_layout() for request `r`: its backend and checkpoints.
Result<SequenceLayout> sequence_layout(const RunRequest& r, const Graph& g,
                                       const StrategySpec& spec);

/// Verifies `loaded` (the first verifier diagnostic), parses the strategy, plans the pipeline
/// and builds the training step. Deterministic, so every MPI rank prepares the same run.
Result<PreparedRun> prepare_run(const RunRequest& r, model::LoadedModel loaded);

/// The reference check's options for `r`: its tolerances and seed, and AdamW's rule when AdamW
/// is the optimizer.
CheckOptions check_options(const RunRequest& r);

/// The reference check of a run with the request's tolerances and seed (AdamW's rule when it is
/// the optimizer): `params` and `inputs` are the whole tensors the partitioned run starts from.
ReferenceCheck make_reference(const RunRequest& r, const PreparedRun& p, TensorMap params,
                              std::vector<Tensor> inputs);

/// What a run's summary says (front ends print it: text, JSON, a Python dict).
struct RunSummary {
  std::string model_name;    ///< the graph's name
  int64_t model_ops = 0;     ///< the ops of the graph run (a training step's, with --train)
  std::string note;          ///< how the plan was made
  std::string devices_text;  ///< `4 threads`, `4 MPI ranks`
  Mesh mesh;
  std::string strategy;
  ProgramStats stats;  ///< over every device's programs
  size_t reshards = 0;
  /// SPMD runs: what the plan leaves unsplit and why (JSON `unsplit_ops`, `idle_axes`).
  SplitReport split;
  /// The split report in words (`heddle run`'s `not split` lines, continuation lines indented
  /// to the summary's value column), and as the JSON keys `idle_axes` (axis names) and
  /// `unsplit_ops` (per op and axis: op kind, result, axis, and per dim its reason and detail),
  /// filled by describe_split() against the planned graph. Empty for pipelines.
  std::string split_text;
  std::vector<std::string> idle_axes;
  struct UnsplitEntry {
    std::string op, result, axis;
    std::vector<std::array<std::string, 3>> dims;  ///< (dim, reason, detail)
  };
  std::vector<UnsplitEntry> unsplit_ops;
  RunResult result;  ///< outputs, losses, step times (wall time: their sum)
  /// Per device, its peak bytes of tiles (JSON `peak_bytes_per_device`): the executor's planned
  /// arena on threads, else the programs' estimate (HostMemory.h); empty: unknown.
  std::vector<int64_t> peak_bytes_per_device;
  /// Per device of an SPMD run, what it holds at its peak: peak_bytes_per_device plus the feeds
  /// its program reads (feed_bytes_per_device(); JSON `held_bytes_per_device`), the figure the
  /// cost model predicts; empty for pipelines.
  std::vector<int64_t> held_bytes_per_device;
  /// Per device, the cost model's peak bytes for the same model and strategy
  /// (predicted_peak_bytes(); JSON `predicted_peak_bytes_per_device`), where the run measured
  /// held_bytes_per_device and the simulator could price it; else empty, with the reason in
  /// `no_prediction`.
  std::vector<double> predicted_peak_bytes_per_device;
  std::string no_prediction;  ///< why there is no prediction (empty: there is one, or no figure)
  std::string digest;         ///< output_digest() of the last step
  std::string params_digest;  ///< training: params_digest() of the final parameters (JSON)
  const CheckErrors* check = nullptr;
  /// Pipelines: stages, micro-batches per step and the schedule followed (JSON `pipeline`).
  int64_t stages = 0, micro_batches = 0;
  std::string schedule;
  /// Training pipelines: the recompute mode executed and the kernel calls per step that
  /// recompute the forward, of all (JSON `pipeline.recompute`, `recompute_kernel_calls`,
  /// `kernel_calls`).
  std::string recompute;
  PipelineCounts counts;
  /// MPI: the most bytes of parameters and inputs one rank holds (generated, or cut from the
  /// weights and input files), and the model's total.
  std::optional<std::pair<int64_t, int64_t>> feed_bytes;
  /// With RunRequest::profile: device 0's step by kernel, slowest first (JSON `profile`); the
  /// timed steps are the ones after the first (all of a one-step run).
  std::vector<ProfileRow> profile;
};

/// Called after each step with its number and, training, its loss (the first output).
using StepHook = std::function<void(int step, std::optional<float> loss)>;

/// The step-loop callback calling `hook` for the steps of `g` (none without a hook).
std::function<void(int, const TensorMap&)> step_callback(const Graph& g, bool train, StepHook hook);

/// What a front end adds to run_threads().
struct ThreadRunHooks {
  /// Checks made once the session exists, before feeds are made (an --output that needs one
  /// output, the host memory the session needs). Default none.
  std::function<Status(const Graph& g, const Session& session)> before_feeds;
  /// The model inputs in graph-input order; default: random from seed + 1.
  std::function<Result<std::vector<Tensor>>(const Graph& g)> inputs;
  /// Called after each step (progress printing). Default none.
  StepHook on_step;
};

/// A finished run on thread-devices: its summary (whose `check` points into `reference`).
struct ThreadRun {
  RunSummary summary;
  std::unique_ptr<ReferenceCheck> reference;  ///< with check only
};

/// Runs `p` on thread-devices: a pipeline when it has one, else SPMD programs planned with
/// search::plan_run and lowered (written to `emit_dir`); feeds from the hooks' inputs and the
/// weights (or generated), or the checkpoint resumed; the steps with the reference check and the
/// checkpoint writer (plan_checkpoints()); the summary filled.
Result<ThreadRun> run_threads(const RunRequest& r, PreparedRun& p, const ThreadRunHooks& hooks);

/// Fills `s`'s split_text, idle_axes and unsplit_ops from `s.split` and `s.mesh`, naming ops and
/// dims of `g`, the graph the plan was made for.
void describe_split(const Graph& g, RunSummary& s);

}  // namespace heddle::driver
