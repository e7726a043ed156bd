// DeepSpeed's JSON config (deepspeed/runtime/constants.py, deepspeed/runtime/zero/config.py and
// the AutoTP `tensor_parallel` section read by deepspeed/__init__.py; docs/export.md).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "Writers.h"

namespace heddle::exporting::detail {

Export deepspeed_json(const ExportPlan& plan) {
  const Degrees d = degrees_of(plan.spec);
  nlohmann::ordered_json j;
  j["train_batch_size"] = plan.batch;
  j["train_micro_batch_size_per_gpu"] = plan.micro_batch;
  j["gradient_accumulation_steps"] = plan.batch / (d.dp * plan.micro_batch);
  nlohmann::ordered_json zero = {{"stage", d.zero}};
  // ZeRO-Offload / ZeRO-Infinity (deepspeed/runtime/zero/offload_config.py: device cpu|nvme).
  const Offload off = plan.spec.offload.value_or(Offload::kNone);
  const bool nvme = off == Offload::kOptimizerParamsNvme;
  nlohmann::ordered_json device = {{"device", nvme ? "nvme" : "cpu"}, {"pin_memory", true}};
  if (nvme) device["nvme_path"] = "/local_nvme";
  if (off != Offload::kNone) zero["offload_optimizer"] = device;
  if (off == Offload::kOptimizerParams || nvme) zero["offload_param"] = device;
  if (plan.spec.overlap.value_or(Overlap::kNone) != Overlap::kNone) zero["overlap_comm"] = true;
  j["zero_optimization"] = zero;
  if (d.tp > 1) j["tensor_parallel"] = {{"autotp_size", d.tp}};
  j["bf16"] = {{"enabled", plan.element_bytes == 2}};
  Export e;
  e.file_name = "deepspeed.json";
  e.text = j.dump(2) + "\n";
  if (plan.spec.recompute == Recompute::kFull)
    e.notes.push_back(
        "recompute=full: DeepSpeed's config does not turn activation checkpointing on; wrap "
        "each layer with deepspeed.checkpointing.checkpoint (or call the model's "
        "gradient_checkpointing_enable())");
  if (nvme)
    e.notes.push_back(
        "offload to NVMe: set zero_optimization.offload_optimizer.nvme_path and "
        "offload_param.nvme_path to the node's local NVMe mount (heddle writes /local_nvme)");
  return e;
}

}  // namespace heddle::exporting::detail
