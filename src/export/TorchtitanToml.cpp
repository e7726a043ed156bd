// torchtitan's TOML job config (torchtitan/config/job_config.py: [training], [parallelism],
// [activation_checkpoint]; docs/export.md names each key's source).
#include <fmt/format.h>

#include "Writers.h"
#include "heddle/support/Strings.h"

namespace heddle::exporting::detail {

namespace {

std::string schedule_name(const StrategySpec& spec) {
  if (!spec.schedule) return "1F1B";
  switch (spec.schedule->kind) {
    case pipeline::ScheduleKind::kGpipe:
      return "GPipe";
    case pipeline::ScheduleKind::kInterleaved:
      return "Interleaved1F1B";
    default:
      return "1F1B";
  }
}

// `module_fqns_per_model_part`: per model chunk, first to last, its modules under torchtitan's
// decoder naming (tok_embeddings, layers.N, norm, output).
std::string model_parts(const ExportPlan& plan) {
  std::vector<std::string> parts;
  int64_t layer = 0;
  for (size_t c = 0; c < plan.chunk_layers.size(); ++c) {
    std::vector<std::string> names;
    if (c == 0) names.push_back("\"tok_embeddings\"");
    for (int64_t k = 0; k < plan.chunk_layers[c]; ++k)
      names.push_back("\"layers." + std::to_string(layer++) + "\"");
    if (c + 1 == plan.chunk_layers.size()) {
      names.push_back("\"norm\"");
      names.push_back("\"output\"");
    }
    parts.push_back("[" + join(names, ", ") + "]");
  }
  return "[" + join(parts, ", ") + "]";
}

}  // namespace

Export torchtitan_toml(const ExportPlan& plan) {
  const Degrees d = degrees_of(plan.spec);
  const int64_t per_replica = plan.batch / d.dp;
  std::string t = fmt::format("# torchtitan job config for heddle's plan {} on {} ranks\n",
                              plan.spec.to_string(), plan.devices);
  t += "\n[training]\n";
  // Without pipelining, micro-batches are gradient-accumulation steps: local_batch_size is one.
  t += fmt::format("local_batch_size = {}\n", d.pp > 1 ? per_replica : plan.micro_batch);
  t += fmt::format("global_batch_size = {}\n", plan.batch);
  if (plan.seq > 0) t += fmt::format("seq_len = {}\n", plan.seq);
  t += fmt::format("mixed_precision_param = \"{}\"\n",
                   plan.element_bytes == 2 ? "bfloat16" : "float32");
  // FSDP2's CPUOffloadPolicy: parameters, gradients and optimizer state on the host.
  if (plan.spec.offload == Offload::kOptimizerParams) t += "enable_cpu_offload = true\n";
  if (plan.spec.precision == Precision::kFp8) t += "\n[model]\nconverters = [\"float8\"]\n";
  t += "\n[parallelism]\n";
  const bool fsdp = d.zero >= 2;
  t += fmt::format("data_parallel_replicate_degree = {}\n", fsdp ? 1 : d.dp);
  t += fmt::format("data_parallel_shard_degree = {}\n", fsdp ? d.dp : 1);
  if (fsdp)
    t += fmt::format("fsdp_reshard_after_forward = \"{}\"\n", d.zero == 2 ? "never" : "always");
  t += fmt::format("tensor_parallel_degree = {}\n", d.tp);
  if (plan.spec.overlap == Overlap::kDpTp && d.tp > 1) t += "enable_async_tensor_parallel = true\n";
  if (d.cp > 1) {
    // Both methods run ring attention's per-block kernels; "alltoall" passes the K/V shards
    // around the ring, "allgather" gathers them whole after the first block.
    t += fmt::format("context_parallel_degree = {}\n", d.cp);
    t += fmt::format("context_parallel_rotate_method = \"{}\"\n",
                     plan.spec.cp_comm == CpComm::kAllGather ? "allgather" : "alltoall");
  }
  t += fmt::format("pipeline_parallel_degree = {}\n", d.pp);
  if (d.pp > 1) {
    t += fmt::format("pipeline_parallel_schedule = \"{}\"\n", schedule_name(plan.spec));
    t += fmt::format("pipeline_parallel_microbatch_size = {}\n", plan.micro_batch);
    t += "module_fqns_per_model_part = " + model_parts(plan) + "\n";
  }
  t += "\n[activation_checkpoint]\n";
  const Recompute r = plan.spec.recompute.value_or(Recompute::kNone);
  t += fmt::format("mode = \"{}\"\n", to_string(r));
  if (r == Recompute::kSelective) t += "selective_ac_option = \"op\"\n";
  Export e;
  e.file_name = "torchtitan.toml";
  e.text = std::move(t);
  if (d.pp > 1)
    e.notes.push_back(
        "module_fqns_per_model_part names torchtitan's decoder modules (tok_embeddings, "
        "layers.N, norm, output); rename them if your model names its modules otherwise");
  return e;
}

}  // namespace heddle::exporting::detail
