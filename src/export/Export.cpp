#include "heddle/export/Export.h"

#include <algorithm>

#include "Writers.h"
#include "heddle/cost/Techniques.h"

namespace heddle::exporting {

namespace detail {

Degrees degrees_of(const StrategySpec& spec) {
  Degrees d;
  d.dp = spec.dp.value_or(1);
  d.tp = spec.tp.value_or(1);
  if (!spec.meshes.empty()) d.dp = spec.meshes.front().dp, d.tp = spec.meshes.front().tp;
  d.pp = spec.pp.value_or(1);
  d.cp = spec.cp.value_or(1);
  d.chunks = d.pp > 1 && spec.schedule ? spec.schedule->chunks : 1;
  d.zero = spec.zero.value_or(0);
  return d;
}

bool even_split(const ExportPlan& plan) {
  const auto& c = plan.chunk_layers;
  return std::adjacent_find(c.begin(), c.end(), std::not_equal_to<>()) == c.end();
}

}  // namespace detail

ExportPlan export_plan_of(const model::ScalableModel& model, const cost::Cluster& cluster,
                          const search::ConfigResult& result, bool train) {
  const auto& sim = result.sim;
  ExportPlan p;
  p.spec = result.spec;
  // The simulator's settings fill what the strategy left to defaults.
  if (!p.spec.heterogeneous()) {
    p.spec.dp = sim.dp, p.spec.tp = sim.tp;
    p.spec.meshes.clear();
  }
  p.spec.pp = sim.pp;
  if (sim.pp > 1) p.spec.schedule = sim.schedule;
  p.spec.recompute = sim.recompute;
  p.kind.train = train;
  p.kind.intra_op_stages = result.stage_planner != "tactics";
  p.devices = sim.devices;
  p.batch = model.batch;
  p.seq = model.seq > 0 ? model.seq : (model.gpt ? model.gpt->seq : 0);  // Llama's too
  p.micro_batch = sim.micro_batch;
  p.micro_batches = sim.micro_batches;
  p.layers = model.layers;
  for (int64_t units : sim.chunk_units) p.chunk_layers.push_back(units * model.unit);
  p.element_bytes = static_cast<int64_t>(cluster.device.element_bytes);
  // The techniques the plan was priced with, defaults filled in: exports name them explicitly.
  if (auto t = cost::resolve_techniques(result.spec, cluster, false); t.ok()) {
    p.spec.precision = t->precision;
    p.spec.attention = t->attention;
    p.spec.overlap = t->overlap;
    if (train) p.spec.offload = t->offload;
  }
  return p;
}

Result<Export> export_plan(Target target, const ExportPlan& plan) {
  if (target == Target::kHeddle || target == Target::kAny)
    return Diagnostic("--export " + to_string(target) +
                      " is not an export format; use megatron, torchtitan or deepspeed");
  auto ok = expressible(target, plan.spec, plan.kind);
  if (!ok.ok())
    return Diagnostic("cannot export the plan " + plan.spec.to_string() + ": " +
                      ok.error().message);
  // Megatron-LM and torchtitan balance causal attention by giving each cp rank two of 2*cp
  // sequence chunks (Megatron's get_batch_on_this_cp_rank, torchtitan's seq_len check).
  const int64_t cp = plan.spec.cp.value_or(1);
  if (cp > 1 && plan.seq > 0 && plan.seq % (2 * cp) != 0)
    return Diagnostic("cannot export the plan " + plan.spec.to_string() + ": " + to_string(target) +
                      " splits the sequence into 2*cp = " + std::to_string(2 * cp) +
                      " chunks for causal load balancing, and the sequence " +
                      std::to_string(plan.seq) + " is not a multiple of it");
  switch (target) {
    case Target::kMegatron:
      return detail::megatron_args(plan);
    case Target::kTorchtitan:
      return detail::torchtitan_toml(plan);
    default:
      return detail::deepspeed_json(plan);
  }
}

}  // namespace heddle::exporting
