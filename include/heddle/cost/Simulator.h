// The simulator: predicts one step of a model under a strategy on a cluster. It costs one
// representative device per pipeline stage (one repeating layer costed once), builds the pipeline
// schedule from those costs and runs it as a discrete-event simulation: step time, busy and idle
// time, bubble, bytes per link, peak memory per device, model TFLOP/s, MFU, and where the step's
// time goes (StepBreakdown, per stage and on average).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/MemoryModel.h"
#include "heddle/cost/ModelParts.h"
#include "heddle/cost/StepBreakdown.h"
#include "heddle/model/ScalableModel.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/sharding/Propagate.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle::cost {

/// Costed stages kept between simulate() calls (one search): the sharded two-layer graph's
/// parts and FLOPs per model, cluster, stage mesh, micro-batch, ZeRO-3, sp and planner.
struct SimulationCache {
  struct Stage {
    ModelParts parts;
    double flops2 = 0, flops1 = 0;  ///< FLOPs of the two-unit and one-unit graphs
    /// Of those, what a causal attention kernel skips (causal_skipped_flops())
    double causal_skipped2 = 0, causal_skipped1 = 0;
  };
  std::map<std::string, Stage> stages;
};

/// Options of simulate().
struct SimulateOptions {
  bool train = false;  ///< forward, backward and optimizer step; default forward only
  /// Overlap dp+tp when the strategy has no `overlap=` (the CLI's --overlap); default false:
  /// the strategy's `overlap=`, else the device's default (resolve_techniques()).
  bool overlap = false;
  bool trace = false;  ///< fill SimulationResult::trace_json; default off
  /// Plans one stage's sharding of the two-layer graph `g` on the costed stage mesh (without its
  /// dp axis when dp only splits the batch; `spec` still has the dp degree) instead of
  /// stage_plan() (the planner's intra-op search), priced on `cluster`: the stage's device kind
  /// with the step's techniques (the whole cluster when it has one kind); default null:
  /// stage_plan().
  std::function<Result<Propagation>(const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                                    const Cluster& cluster)>
      stage_planner;
  /// Non-null: reuse costed stages across calls (the planner's search); default null.
  std::shared_ptr<SimulationCache> cache;
  std::string planner_key;  ///< names stage_planner in cache keys; default empty
  /// With `train`: cost backward and optimizer from the autodiff training step of
  /// model::ScalableModel::build_loss (forward with loss, backward, AdamW; each layer's share by
  /// differencing the steps of one and two repeating units) instead of 2x the forward compute
  /// plus a closed-form all-reduce and optimizer pass. Ignored without build_loss. Default off
  /// (the Megatron validation uses the closed forms).
  bool autodiff = false;
  /// Charge what heddle's executor does around the ops (cost_executor_io()): loading every input
  /// and parameter tile from the feeds, and gathering every graph output onto every device at
  /// the end (lowering's replicate_outputs, as `heddle run` lowers). Default off.
  bool executor_io = false;
};

/// One pipeline stage (one representative device).
struct StageResult {
  int64_t dp = 1, tp = 1;         ///< the stage's sub-mesh: dp replicas of a tp group
  int64_t devices = 1;            ///< dp x cp x tp x ep
  int64_t kind = 0;               ///< the cluster's device kind it runs on (Cluster::kinds)
  std::string device;             ///< that kind's device name
  double memory_limit_bytes = 0;  ///< that kind's device memory
  int64_t micro_batch = 1;        ///< sequences per replica per micro-batch
  int64_t layers = 0;             ///< repeating layers held (over all chunks)
  double busy_s = 0;              ///< compute + blocking communication time
  double idle_s = 0;              ///< step time minus busy
  double state_bytes = 0;         ///< weights, gradients, optimizer state (model_state_bytes())
  /// Gradient buckets in flight and gathered parameters under ZeRO-2/3
  /// (gradient_buffer_bytes()).
  double buffer_bytes = 0;
  /// Peak activations under the schedule (kept for backward by the chunks in flight, the
  /// embedding on the first stage, the logits the loss keeps on the last) plus the working set
  /// of the block running (recomputation, the logits before the loss).
  double activation_bytes = 0;
  /// The allocator allowance: runtime memory and fragmentation (allocator_allowance_bytes()).
  double allocator_bytes = 0;
  /// The most micro-batch chunks whose kept activations the stage holds at once, walked from
  /// the schedule (pipeline::peak_in_flight()): `pp - s` on stage s of 1F1B.
  int64_t in_flight = 0;
  /// state + buffer + activation + allocator bytes.
  double peak_memory_bytes = 0;
  double host_bytes = 0;  ///< host memory the device's offloaded state takes (offload=)
  double nvme_bytes = 0;  ///< NVMe the device's offloaded state takes (offload=...:nvme)
  double parameters = 0;  ///< parameter elements on the device
  /// Where the step's time goes on this stage's devices; its exposed total is the step time
  /// (busy categories plus `bubble_s` = idle_s).
  StepBreakdown breakdown;
};

/// What a simulated step achieves.
struct SimulationResult {
  std::string strategy;  ///< canonical strategy string (re-simulates the same plan)
  int64_t devices = 0, dp = 1, tp = 1, pp = 1, micro_batch = 1, micro_batches = 1, chunks = 1;
  int64_t cp = 1;  ///< context-parallel degree: the sequence split over this many devices
  /// `dp`, `tp` and `micro_batch` are the first stage's when `heterogeneous` (per-stage
  /// sub-meshes of different shapes; `stages` has each one's).
  bool heterogeneous = false;
  pipeline::PipelineSchedule schedule;  ///< the pipeline schedule used
  Recompute recompute = Recompute::kNone;
  double step_time_s = 0;
  /// Model FLOPs per step, all devices, heddle's convention (ModelFlops.h): forward once and
  /// backward twice, no recomputation, causal attention over half the scores; MFU and TFLOP/s
  /// per device from it.
  double model_flops = 0;
  double tflops_per_device = 0;
  double mfu = 0;  ///< tflops_per_device over the devices' mean bf16 peak
  /// The same in the published convention Megatron-LM, NeMo and torchtitan report (full `s^2`
  /// attention; GPT models by Megatron's formula, recomputation included): for comparison with
  /// their tables.
  double published_model_flops = 0;
  double published_tflops_per_device = 0;
  double published_mfu = 0;
  double bubble_fraction = 0;     ///< idle share of the pipeline schedule
  double peak_memory_bytes = 0;   ///< largest over devices
  double memory_limit_bytes = 0;  ///< the limit of the stage closest to its own (mixed clusters)
  double host_memory_bytes = 0;   ///< largest host memory a device's offload takes
  double host_memory_limit_bytes = 0;  ///< the cluster's host memory per device
  double nvme_bytes = 0;               ///< largest NVMe share a device's offload takes
  double nvme_limit_bytes = 0;         ///< the cluster's NVMe per device
  bool feasible = true;   ///< peak memory fits (and offloaded state fits in host memory)
  double comm_bytes = 0;  ///< bytes one device sends per step (largest over stages)
  std::map<std::string, double> link_bytes;  ///< per link class, bytes per device per step
  double dp_sync_s = 0;                      ///< exposed gradient reduction
  std::vector<StageResult> stages;
  /// The stages' breakdowns averaged over devices (each stage weighted by its device count): what
  /// a device spends the step on; its exposed total is the step time.
  StepBreakdown breakdown;
  /// Per pipeline chunk (first to last), the layer units it holds and the seconds one
  /// micro-batch spends in it apart from those units (embedding, head, sends; forward, plus
  /// backward when training); `unit_s` is what each unit adds. A layer split's chunk time is
  /// `chunk_fixed_s[c] + chunk_units[c] * unit_s`. Empty and 0 for a model without layers.
  std::vector<int64_t> chunk_units;
  std::vector<double> chunk_fixed_s;
  double unit_s = 0;
  std::vector<double> chunk_unit_s;  ///< per chunk, what each unit adds (its stage's mesh)
  int64_t events = 0;                ///< simulated events (blocks per micro-batch and step)
  double energy_j = 0;     ///< per step, every device: busy x tdp_watts + idle x idle_watts
  std::string trace_json;  ///< Chrome trace when requested
  std::string cluster_source;
};

/// The sharding the simulator costs for one pipeline stage: plan_from_strategy() of `spec`
/// without its pp degree on the stage's mesh `mesh`, with propagation priced by the cluster's
/// links and compute rate. Exposed so that a measured run can execute the very same plan.
Result<Propagation> stage_plan(const Graph& g, const Mesh& mesh, const Cluster& cluster,
                               const StrategySpec& spec);

/// Simulates one step of `model` under `spec` on `cluster`. Diagnostics: degrees that do not
/// multiply to the cluster's device count (`auto` is not simulated: give the degrees), a batch
/// the degrees and micro-batch do not divide, pipeline stages on a model without layers, more
/// pipeline chunks than layers, an unknown schedule or recompute value, a `layers=` split that
/// does not give one positive multiple of the repeating unit per chunk summing to the model's
/// layers. `spec.layers` set: chunk c holds that many layers (default: as even as they divide).
/// `spec.meshes` set: stage s runs on its own dp_s x tp_s sub-mesh (the sub-meshes must add up to
/// the cluster's devices): its compute, gradient all-reduce, optimizer and memory (ZeRO over
/// dp_s) on that mesh, every micro-batch of B / m sequences split over its dp_s replicas (m from
/// `microbatches`, default B / lcm(dp_s); `mb` is refused), and a send between differently tiled
/// stages priced as the resharding it is (every receiver gets its tile, every sender sends its
/// share). Equal sub-meshes give exactly the plain dp/tp result and strategy string. Not with
/// `autodiff` or `executor_io`.
Result<SimulationResult> simulate(const model::ScalableModel& model, const Cluster& cluster,
                                  const StrategySpec& spec, const SimulateOptions& options = {});

}  // namespace heddle::cost
