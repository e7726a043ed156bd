// How a priced step is reported (`heddle plan`, `heddle simulate`, the Python Plan): the step
// breakdown (text and JSON, whole step and per stage), the workload it assumes (batch, sequence,
// tokens per step and per second per device, memory limit, cluster), and warnings about defaults
// that make a plan meaningless.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "heddle/cost/Simulator.h"
#include "heddle/support/Diagnostic.h"

namespace heddle::cost {

/// The breakdown as a JSON object: one key per category (StepBreakdown::entries()), seconds.
nlohmann::json breakdown_json(const StepBreakdown& b);

/// The result's JSON keys shared by plan and simulate: `breakdown`, each stage's breakdown and
/// memory (`state_bytes`, `buffer_bytes`, `activation_bytes`, `allocator_bytes`,
/// `peak_memory_bytes`, `in_flight`; into `stages_key`'s array, entry by entry, when that key
/// holds one), `batch`, `seq` (when
/// the model has sequences), `tokens_per_step`, `tokens_per_s_per_device`, `micro_batches`,
/// `micro_batch`.
void add_step_json(nlohmann::json& j, const SimulationResult& r, const model::ScalableModel& src,
                   const std::string& stages_key);

/// The text block: where a device's step goes (seconds and share, largest first; overlapped
/// time listed apart) and, with several stages, one line per stage.
std::string breakdown_text(const SimulationResult& r);

/// With several pipeline stages, one line of each stage's peak memory and the worst stage's
/// parts (`per stage   65.6 | 71.1 | ... GiB; worst stage 3: states 12.4, activations 55.0 (13
/// micro-batch chunks in flight), allocator 4.6 GiB`); empty with one stage.
std::string stage_memory_text(const SimulationResult& r);

/// `workload   batch 1536 x seq 2048 = 3.1M tokens per step, 12.3k tokens/s per device`.
std::string workload_text(const SimulationResult& r, const model::ScalableModel& src);

/// `128 micro-batches of 1 sequence per data-parallel replica` (per stage when they differ).
std::string micro_batches_text(const SimulationResult& r);

/// The warnings about a plan's workload: a batch left at the preset's default (`batch_given`
/// false) that cannot keep `devices` busy. Empty when there is nothing to say.
std::vector<std::string> workload_warnings(const model::ScalableModel& src, bool batch_given,
                                           int64_t devices, bool train);

/// A simulated step as one JSON object (`heddle simulate --json`): step time, MFU, energy,
/// memory (device and host, with their limits), bubble, bytes per link, per-stage figures
/// (`stages`), feasibility, then add_step_json()'s keys.
nlohmann::json simulation_json(const SimulationResult& r, const model::ScalableModel& src);

/// `heddle simulate`'s text for `model` (as the user named it): strategy, workload,
/// micro-batches, step time, TFLOP/s and MFU, bubble, device and host memory with their limits,
/// NVMe, bytes per link, the breakdown and one row per stage (its device kind on a `mixed`
/// cluster).
std::string simulation_text(const SimulationResult& r, const model::ScalableModel& src,
                            const std::string& model, bool train, bool mixed);

/// Why a simulated step does not fit, with what to try: the offloaded state overflows the host,
/// or the fullest device's peak exceeds its memory. Nothing when `r.feasible`.
std::optional<Diagnostic> infeasibility(const SimulationResult& r);

}  // namespace heddle::cost
