#include "heddle/export/Target.h"

#include <algorithm>

namespace heddle::exporting {

namespace {

using pipeline::ScheduleKind;

constexpr std::pair<Target, std::string_view> kNames[] = {{Target::kMegatron, "megatron"},
                                                          {Target::kTorchtitan, "torchtitan"},
                                                          {Target::kDeepSpeed, "deepspeed"},
                                                          {Target::kHeddle, "heddle"},
                                                          {Target::kAny, "any"}};

std::string stack_name(Target t) {
  switch (t) {
    case Target::kMegatron:
      return "Megatron-LM";
    case Target::kTorchtitan:
      return "torchtitan";
    case Target::kDeepSpeed:
      return "DeepSpeed";
    case Target::kHeddle:
      return "heddle run";
    case Target::kAny:
      return "any stack";
  }
  return "?";
}

Diagnostic refuse(Target t, const std::string& what, const std::string& why) {
  return Diagnostic(stack_name(t) + " cannot run " + what + ": " + why);
}

// Reasons shared by every external stack (Megatron-LM, torchtitan, DeepSpeed).
Status external_common(Target t, const StrategySpec& spec, const PlanKind& kind) {
  if (!kind.train)
    return refuse(t, "a forward-only plan",
                  "its export is a training configuration; plan with --train");
  if (spec.heterogeneous())
    return refuse(t, "per-stage sub-meshes (meshes=)",
                  "every pipeline stage of its runs has the same data x tensor parallel grid; "
                  "plan with --target " +
                      to_string(t) + " to keep equal stages");
  if (kind.intra_op_stages)
    return refuse(t, "stages sharded by heddle's intra-op ILP",
                  "it shards each layer Megatron-style (the tactics); plan with --target " +
                      to_string(t) + " to keep the tactics' stage plans");
  if (spec.ep.value_or(1) > 1)
    return refuse(t, "ep=" + std::to_string(*spec.ep),
                  "heddle's expert axis is separate from data parallelism (devices = "
                  "dp*tp*pp*ep), while the stack folds expert parallelism into its "
                  "data-parallel ranks");
  return {};
}

Status megatron(const StrategySpec& spec) {
  const Target t = Target::kMegatron;
  const int64_t pp = spec.pp.value_or(1), zero = spec.zero.value_or(0);
  if (pp > 1 && spec.schedule) {
    auto k = spec.schedule->kind;
    if (k != ScheduleKind::k1f1b && k != ScheduleKind::kInterleaved)
      return refuse(t, "schedule=" + spec.schedule->to_string(),
                    "its pipeline schedules are 1F1B and interleaved 1F1B (virtual stages)");
  }
  const Offload off = spec.offload.value_or(Offload::kNone);
  if (off != Offload::kNone && off != Offload::kOptimizer)
    return refuse(t, "offload=" + std::string(to_string(off)),
                  "it offloads the optimizer only (--optimizer-cpu-offload); use "
                  "offload=optimizer or DeepSpeed");
  if (off == Offload::kOptimizer && zero != 1)
    return refuse(t, "offload=optimizer with zero=" + std::to_string(zero),
                  "its optimizer offload runs with the distributed optimizer; use zero=1");
  if (zero >= 2 && pp > 1)
    return refuse(t, "zero=" + std::to_string(zero) + " with pp=" + std::to_string(pp),
                  "gradients and parameters are sharded by Megatron-FSDP, which heddle exports "
                  "without pipeline parallelism only; use zero=1 (distributed optimizer)");
  return {};
}

Status torchtitan(const StrategySpec& spec) {
  const Target t = Target::kTorchtitan;
  const int64_t pp = spec.pp.value_or(1), zero = spec.zero.value_or(0);
  if (spec.tp.value_or(1) > 1 && !spec.sp)
    return refuse(t, "tp=" + std::to_string(*spec.tp) + " without sp",
                  "it applies sequence parallelism with every tensor-parallel degree; use sp=on");
  const Offload off = spec.offload.value_or(Offload::kNone);
  if (off != Offload::kNone && (off != Offload::kOptimizerParams || zero != 3))
    return refuse(t,
                  "offload=" + std::string(to_string(off)) + " with zero=" + std::to_string(zero),
                  "FSDP2 offloads parameters, gradients and optimizer state together to host "
                  "memory (training.enable_cpu_offload); use offload=optimizer+params with zero=3");
  if (zero == 1)
    return refuse(t, "zero=1",
                  "it shards with FSDP2, which always shards gradients with the optimizer state "
                  "(zero=2: fsdp_reshard_after_forward = \"never\"; zero=3: \"always\"); use "
                  "zero=0, 2 or 3");
  if (zero == 0 && spec.cp.value_or(1) > 1)
    return refuse(t, "cp=" + std::to_string(*spec.cp) + " with zero=0",
                  "with context parallelism it always shards the weights with FSDP2 over the "
                  "data-parallel shard and cp ranks together; use zero=2 or 3");
  if (zero == 0 && spec.dp.value_or(1) > 1 && (spec.tp.value_or(1) > 1 || pp > 1))
    return refuse(t, "zero=0 with tp or pp",
                  "its replicated data parallelism (DDP) runs without other parallelism; use "
                  "zero=2 or 3 (FSDP2)");
  if (pp > 1 && spec.schedule) {
    auto k = spec.schedule->kind;
    if (k == ScheduleKind::kZbH1 || k == ScheduleKind::kZbH2 || k == ScheduleKind::kSearched)
      return refuse(t, "schedule=" + spec.schedule->to_string(),
                    "its pipeline schedules are GPipe, 1F1B, Interleaved1F1B and the multi-stage "
                    "zero-bubble ones (InterleavedZeroBubble, ZBVZeroBubble), not H1/H2 with one "
                    "stage per rank");
  }
  return {};
}

Status deepspeed(const StrategySpec& spec) {
  const Target t = Target::kDeepSpeed;
  if (spec.cp.value_or(1) > 1)
    return refuse(t, "cp=" + std::to_string(*spec.cp),
                  "its sequence parallelism (DeepSpeed-Ulysses, deepspeed.sequence) is another "
                  "algorithm: an all-to-all that gives each rank whole sequences of some heads, "
                  "not key and value blocks passed to every query block (ring or all-gather); "
                  "and it is set up in model code, not by its JSON config");
  if (spec.pp.value_or(1) > 1)
    return refuse(t, "pp=" + std::to_string(*spec.pp),
                  "its pipeline parallelism is built in model code (deepspeed.pipe.PipelineModule) "
                  "with its own schedule, not set by its JSON config");
  if (spec.sp && spec.tp.value_or(1) > 1)
    return refuse(t, "sp=on",
                  "its tensor parallelism (AutoTP, tensor_parallel.autotp_size) has no "
                  "Megatron-style sequence parallelism; use sp=off");
  const Offload off = spec.offload.value_or(Offload::kNone);
  const int64_t zero = spec.zero.value_or(0);
  if (off == Offload::kActivations)
    return refuse(t, "offload=activations",
                  "its config offloads only recomputation checkpoints (cpu_checkpointing); use "
                  "recompute=full");
  if ((off == Offload::kOptimizer && zero == 0) ||
      ((off == Offload::kOptimizerParams || off == Offload::kOptimizerParamsNvme) && zero != 3))
    return refuse(t,
                  "offload=" + std::string(to_string(off)) + " with zero=" + std::to_string(zero),
                  "offload_optimizer takes ZeRO 1-3 and offload_param ZeRO-3");
  if (spec.precision == Precision::kFp8)
    return refuse(t, "precision=fp8",
                  "its config has no fp8 training switch (Transformer Engine goes in model code)");
  if (spec.overlap == Overlap::kDpTp && spec.tp.value_or(1) > 1)
    return refuse(t, "overlap=dp+tp", "AutoTP does not overlap its collectives with GEMMs");
  if (spec.recompute == Recompute::kSelective)
    return refuse(t, "recompute=selective",
                  "activation checkpointing wraps whole layers (deepspeed.checkpointing); use "
                  "recompute=full or none");
  return {};
}

}  // namespace

Result<Target> parse_target(std::string_view text) {
  for (const auto& [t, name] : kNames)
    if (text == name) return t;
  return Diagnostic("--target '" + std::string(text) +
                    "' is not a stack; use megatron, torchtitan, deepspeed, heddle or any");
}

std::string to_string(Target t) {
  for (const auto& [k, name] : kNames)
    if (k == t) return std::string(name);
  return "?";
}

Status expressible(Target target, const StrategySpec& spec, const PlanKind& kind) {
  if (target == Target::kAny) return {};
  if (spec.pp.value_or(1) > 1 && spec.schedule && spec.schedule->kind == ScheduleKind::kSearched)
    return refuse(target, "schedule=searched",
                  "a searched schedule is priced by `heddle schedule` only");
  if (target == Target::kHeddle) {
    if (spec.heterogeneous())
      return refuse(target, "per-stage sub-meshes (meshes=)",
                    "its MPI backend runs every stage on one dp x tp stage mesh (the threads "
                    "backend runs sub-meshes, on one host)");
    if (kind.intra_op_stages)
      return refuse(target, "pipeline stages sharded by the intra-op ILP",
                    "run lowers a strategy's stages with the tactics");
    return {};
  }
  HEDDLE_TRY(external_common(target, spec, kind));
  switch (target) {
    case Target::kMegatron:
      return megatron(spec);
    case Target::kTorchtitan:
      return torchtitan(spec);
    case Target::kDeepSpeed:
      return deepspeed(spec);
    default:
      return {};
  }
}

std::vector<Target> runnable_by(const StrategySpec& spec, const PlanKind& kind) {
  std::vector<Target> out;
  for (Target t : kStacks)
    if (expressible(t, spec, kind).ok()) out.push_back(t);
  return out;
}

StrategySpec target_pins(Target target, StrategySpec pins) {
  if (target == Target::kTorchtitan) pins.sp = true;
  return pins;
}

}  // namespace heddle::exporting
