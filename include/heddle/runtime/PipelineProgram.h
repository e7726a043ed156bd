// Pipeline programs: a model split into chunks, each a forward and (training) a backward block
// lowered for its stage's sub-mesh (split into input- and weight-gradient blocks for zero-bubble
// schedules), the forward stashing the activations the backward reads unless `recompute=` says
// to recompute them, per-stage optimizer blocks, and every stage's order of blocks from a
// pipeline schedule (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/Program.h"
#include "heddle/sharding/Recompute.h"
#include "heddle/sharding/StrategySpec.h"
#include "heddle/sharding/UserTactics.h"

namespace heddle {

/// What build_pipeline() makes the pipeline of.
struct PipelineOptions {
  int64_t stages = 2;         ///< pp: pipeline stages, each on its own sub-mesh. Default 2.
  int64_t micro_batches = 1;  ///< micro-batches per step. Default 1.
  /// GPipe, 1F1B (default), interleaved:V (V chunks per stage; the stage count must divide the
  /// micro-batches), or the zero-bubble ZB-H1 / ZB-H2 (the backward split into input-gradient
  /// and weight-gradient blocks); `searched` is a diagnostic. Forward-only pipelines always run
  /// GPipe's order over the schedule's chunks.
  pipeline::PipelineSchedule schedule;
  bool train = false;  ///< build backward and optimizer blocks. Default false (forward only).
  /// The strategy inside every stage (its pp is ignored); its degrees give the stage mesh, or,
  /// with per-stage `meshes`, stage s is meshes[s].dp x meshes[s].tp (sub-meshes may differ in
  /// size). Default: one device per stage.
  StrategySpec inner;
  /// Repeating layer units per chunk (the strategy's `layers=`, see split_stages); default
  /// empty: as even as they divide.
  std::vector<int64_t> layers;
  TrainStepOptions optimizer;  ///< the optimizer of training pipelines. Default AdamW.
  /// What backward blocks recompute of their chunk's forward (recomputed_forward_ops): kNone
  /// (default) stashes every activation they read, kSelective recomputes attention's scores and
  /// probabilities, kFull the whole chunk from the values it received.
  Recompute recompute = Recompute::kNone;
  /// Declarative tactics (the model's annotations and `--tactic`), pinned in every block of a
  /// stage of more than one device whose graph holds the value they name (an op tactic: where
  /// an op of the block defines it), on the stage's mesh; conflicts with the stage strategy's
  /// presets name both sources. Default none.
  std::vector<Tactic> tactics;
};

/// A graph with the programs of every device of a stage, lowered from it.
struct StageBlock {
  Graph graph;
  std::vector<DeviceProgram> programs;  ///< by device index within the stage
  /// Backward and weight blocks: the ops of `graph` that recompute an op of the chunk's forward.
  std::vector<OpId> recomputed;
};

/// One value crossing between chunks: produced by `from`, read by `to` (> from).
struct PipelineEdge {
  std::string value;
  int64_t from = 0, to = 0;
};

/// One chunk (a contiguous run of the model's ops) and its blocks.
struct PipelineChunk {
  int64_t stage = 0;  ///< chunk c of C lives on stage c % stages
  /// Forward: reads `inputs` (model inputs), `params` and the values of edges into it (as
  /// parameters of the same name); outputs the values of edges out of it and the model outputs
  /// it produces (`outputs`).
  StageBlock forward;
  /// Training only: the same ops; reads also `pipe_grad.<v>` for each value v on an edge out of
  /// it; outputs the gradient of the chunk's loss (its share of the model loss, divided by the
  /// micro-batch count, plus the sum of v * pipe_grad.<v>) for every parameter and every value
  /// on an edge into it, named in `grads` (value or parameter name -> graph value).
  StageBlock backward;
  std::vector<std::pair<std::string, ValueId>> grads;
  /// Zero-bubble schedules only (PipelineProgram::split_backward): the backward block keeps
  /// only the gradients of values on edges into the chunk (B) and this block computes the
  /// parameters' gradients (W), named in `weight_grads`, from what B stashes for it
  /// (`backward_stashed`) and the forward's stash. A block with nothing to compute has no programs.
  StageBlock weight;
  std::vector<std::pair<std::string, ValueId>> weight_grads;
  /// Training: the forward block's results the backward and weight blocks read instead of
  /// recomputing them (also outputs of the forward block), kept per micro-batch until then.
  std::vector<std::string> stashed;
  /// Zero-bubble: B's results W reads instead of recomputing them (also outputs of B).
  std::vector<std::string> backward_stashed;
  std::vector<std::string> inputs, params, outputs;
};

/// One step of a stage's order: the forward or backward block of `chunk` for micro-batch `micro`.
struct PipelineStep {
  int64_t micro = 0;
  int64_t chunk = 0;
  bool backward = false;
  bool weight = false;  ///< zero-bubble: the weight-gradient block W (then backward is true too)
};

/// Kernel calls of a pipeline step: all of them, and those that recompute a forward op in a
/// backward or weight block (zero under recompute=none).
struct PipelineCounts {
  int64_t kernel_calls = 0;
  int64_t recompute_calls = 0;
};

/// Everything a pipeline run executes.
struct PipelineProgram {
  int64_t stages = 0;
  int64_t micro_batches = 0;
  /// Devices per stage when every stage has as many (then device d is on stage
  /// d / stage_devices); 0 when the stages' sub-meshes differ in size (`meshes=`).
  int64_t stage_devices = 1;
  Mesh stage_mesh;  ///< the mesh inside stage 0 (axes dp, ep, tp); every stage's in stage_meshes
  /// Per stage, its own sub-mesh; stage s holds global devices [stage_first[s],
  /// stage_first[s + 1]) (stage_first has stages + 1 entries).
  std::vector<Mesh> stage_meshes;
  std::vector<int64_t> stage_first;
  bool train = false;
  bool split_backward = false;             ///< zero-bubble: backward blocks are B, weight blocks W
  Recompute recompute = Recompute::kNone;  ///< what backward blocks recompute (training)
  pipeline::PipelineSchedule schedule;     ///< the schedule whose order the stages follow
  std::vector<PipelineChunk> chunks;
  std::vector<PipelineEdge> edges;
  std::vector<std::vector<PipelineStep>> order;  ///< per stage
  /// Training: per stage, the parameters it updates (those whose first reader is on it) and its
  /// optimizer block (their `pipe_grad.<p>` inputs -> updated parameters and state).
  std::vector<std::vector<std::string>> owned;
  std::vector<StageBlock> optimizer;
  std::vector<std::vector<ParamUpdate>> updates;  ///< per stage, values of `optimizer[s].graph`
  /// The model's parameters and inputs by name (types at micro-batch size) and its outputs.
  std::map<std::string, TensorType> param_types, input_types;
  std::vector<std::string> output_names;

  /// The parameters stage `s` reads, and (training) the optimizer state of those it owns.
  std::vector<std::string> stage_params(int64_t s) const;
  /// True when edge `edge` carries a gradient back (training, float value). Precondition: edge
  /// indexes `edges`.
  bool carries_grad(size_t edge) const;
  /// Devices of every stage together.
  int64_t num_devices() const { return stage_first.back(); }
  /// Devices of stage `s`. Precondition: 0 <= s < stages.
  int64_t devices_of(int64_t s) const { return stage_first[s + 1] - stage_first[s]; }
  /// The stage global device `d` is on. Precondition: 0 <= d < num_devices().
  int64_t stage_of_device(int64_t d) const;
  /// The stage of chunk `c`.
  int64_t stage_of(int64_t c) const { return chunks[static_cast<size_t>(c)].stage; }
  /// Statistics of every lowered program (all blocks, all devices).
  ProgramStats stats() const;
  /// The kernel calls one step executes, summed over every device: each stage's order of
  /// blocks, then its optimizer block.
  PipelineCounts step_counts() const;
  /// What global device `device` must hold of the model: per parameter and optimizer state of
  /// its stage and per model input (at micro-batch size) its blocks read, the smallest box
  /// covering every tile its programs (all blocks of its stage) load, by name. Precondition:
  /// 0 <= device < stages * stage_devices.
  std::map<std::string, Box> device_loads(int64_t device) const;
  /// The box of edge `edge`'s value (`grad`: of its gradient) that device `local` of the
  /// receiving stage needs: what its programs of the receiving chunk load of it (activations: the
  /// `to` chunk's forward and backward blocks; gradients: the `from` chunk's backward block).
  /// Precondition: edge indexes `edges`; a gradient only for float values.
  Box receive_box(size_t edge, int64_t local, bool grad) const;
};

/// Builds the pipeline of `model` (a verified graph at micro-batch size; for training its single
/// output is a scalar loss averaged over the batch). Diagnostics: a schedule the runtime does
/// not run (it lists those it does), interleaving whose stage count does not divide the
/// micro-batches, fewer ops than chunks, a stage strategy that does not fit a chunk.
Result<PipelineProgram> build_pipeline(const Graph& model, const PipelineOptions& options);

}  // namespace heddle
