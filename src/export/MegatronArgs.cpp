// Megatron-LM's command-line arguments (megatron/training/arguments.py and the config dataclasses
// its arguments are generated from; docs/export.md names each flag's source).
#include <fmt/format.h>

#include "Writers.h"
#include "heddle/support/Strings.h"

namespace heddle::exporting::detail {

namespace {

// `--pipeline-model-parallel-layout`: one `|`-separated entry per model chunk, first to last
// (Megatron orders virtual stages as heddle's chunks), `E` the embedding, `t*N` N decoder layers,
// `L` the loss.
std::string layout(const ExportPlan& plan) {
  std::vector<std::string> stages;
  for (size_t c = 0; c < plan.chunk_layers.size(); ++c) {
    std::string s = c == 0 ? "E" : "";
    s += "t*" + std::to_string(plan.chunk_layers[c]);
    if (c + 1 == plan.chunk_layers.size()) s += "L";
    stages.push_back(s);
  }
  return join(stages, "|");
}

}  // namespace

Export megatron_args(const ExportPlan& plan) {
  const Degrees d = degrees_of(plan.spec);
  std::vector<std::string> args;
  auto arg = [&](const std::string& flag, const std::string& value = "") {
    args.push_back(value.empty() ? flag : flag + " " + value);
  };
  arg("--tensor-model-parallel-size", std::to_string(d.tp));
  arg("--pipeline-model-parallel-size", std::to_string(d.pp));
  if (d.cp > 1) {
    // p2p is Megatron's ring attention (its default); allgather gathers K and V whole.
    arg("--context-parallel-size", std::to_string(d.cp));
    arg("--cp-comm-type", plan.spec.cp_comm == CpComm::kAllGather ? "allgather" : "p2p");
  }
  if (d.pp > 1 && !even_split(plan))
    arg("--pipeline-model-parallel-layout", "\"" + layout(plan) + "\"");
  else if (d.chunks > 1)
    arg("--num-virtual-stages-per-pipeline-rank", std::to_string(d.chunks));
  if (plan.spec.sp && d.tp > 1) arg("--sequence-parallel");
  if (d.zero == 1) arg("--use-distributed-optimizer");
  if (d.zero >= 2) {
    arg("--use-megatron-fsdp");
    arg("--data-parallel-sharding-strategy", d.zero == 2 ? "optim_grads" : "optim_grads_params");
  }
  const Recompute r = plan.spec.recompute.value_or(Recompute::kNone);
  if (r == Recompute::kSelective) arg("--recompute-granularity", "selective");
  if (r == Recompute::kFull) {
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    arg("--recompute-num-layers", "1");
  }
  arg("--micro-batch-size", std::to_string(plan.micro_batch));
  arg("--global-batch-size", std::to_string(plan.batch));
  if (plan.layers > 0) arg("--num-layers", std::to_string(plan.layers));
  if (plan.seq > 0) arg("--seq-length", std::to_string(plan.seq));
  if (plan.element_bytes == 2) arg("--bf16");
  // The techniques (megatron/training/arguments.py; docs/export.md).
  if (plan.spec.precision == Precision::kFp8) arg("--fp8-format", "hybrid");
  if (plan.spec.attention)
    arg("--attention-backend", *plan.spec.attention == Attention::kFlash ? "flash" : "unfused");
  const Overlap ov = plan.spec.overlap.value_or(Overlap::kNone);
  if (ov != Overlap::kNone) {
    arg("--overlap-grad-reduce");
    if (d.zero >= 1) arg("--overlap-param-gather");
    if (ov == Overlap::kDpTp && d.tp > 1) arg("--tp-comm-overlap");
  }
  if (plan.spec.offload == Offload::kOptimizer) {
    arg("--optimizer-cpu-offload");
    arg("--optimizer-offload-fraction", "1.0");
    arg("--use-precision-aware-optimizer");
    if (ov != Overlap::kNone) arg("--overlap-cpu-optimizer-d2h-h2d");
  }
  Export e;
  e.file_name = "megatron_args.txt";
  const std::string cp = d.cp > 1 ? fmt::format(" x cp {}", d.cp) : "";
  e.text = fmt::format(
      "# Megatron-LM arguments for heddle's plan {}: launch {} ranks (data parallel {} = {} / "
      "(tp {}{} x pp {}))\n",
      plan.spec.to_string(), plan.devices, d.dp, plan.devices, d.tp, cp, d.pp);
  e.text += join(args, " \\\n") + "\n";
  return e;
}

}  // namespace heddle::exporting::detail
