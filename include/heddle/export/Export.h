// Plans written for the stacks people train with: Megatron-LM command-line arguments, a
// torchtitan TOML job config, a DeepSpeed JSON config. docs/export.md maps every strategy key to
// every target and names where each flag comes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/export/Target.h"
#include "heddle/search/ConfigSearch.h"

namespace heddle::exporting {

/// What an export needs of a plan: its strategy and the workload it was priced for.
struct ExportPlan {
  StrategySpec spec;  ///< the plan's strategy (as the search or the user gave it)
  PlanKind kind;      ///< training or not, and how stages were sharded
  int64_t devices = 1;
  int64_t batch = 1;                  ///< global batch (sequences per step)
  int64_t seq = 0;                    ///< sequence length; 0: unknown (not written)
  int64_t micro_batch = 1;            ///< sequences per replica per micro-batch
  int64_t micro_batches = 1;          ///< micro-batches per step
  int64_t layers = 0;                 ///< the model's repeating layers; 0: not layered
  std::vector<int64_t> chunk_layers;  ///< per pipeline chunk, first to last, its layers
  int64_t element_bytes = 2;          ///< 2: bf16 training, 4: fp32
};

/// The ExportPlan of a search result (or a simulated strategy) of `model` on `cluster`: the
/// strategy with the simulator's degrees, micro-batching, schedule and layer split filled in.
ExportPlan export_plan_of(const model::ScalableModel& model, const cost::Cluster& cluster,
                          const search::ConfigResult& result, bool train);

/// An export: the text and the file name it is written to, and what the user must still do in
/// their own code (e.g. turning on activation checkpointing in DeepSpeed).
struct Export {
  std::string text;
  std::string file_name;           ///< `megatron_args.txt`, `torchtitan.toml`, `deepspeed.json`
  std::vector<std::string> notes;  ///< one sentence each; empty when the file says it all
};

/// Writes `plan` for `target` (kMegatron, kTorchtitan or kDeepSpeed). Diagnostics: a plan the
/// target cannot express (expressible()), with the reason and what to plan instead, and
/// kHeddle / kAny, which have no export format.
Result<Export> export_plan(Target target, const ExportPlan& plan);

}  // namespace heddle::exporting
