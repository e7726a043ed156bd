#include "heddle/export/PlanTarget.h"

#include "heddle/export/RankGroups.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Strings.h"

namespace heddle::exporting {

Result<PlanTarget> apply_target_flags(const TargetFlags& flags, cost::Cluster& cluster,
                                      search::ConfigSearchOptions& o) {
  PlanTarget t;
  if (!flags.export_format.empty()) {
    auto e = parse_target(flags.export_format);
    if (!e.ok() || *e == Target::kHeddle || *e == Target::kAny)
      return Diagnostic("--export '" + flags.export_format +
                        "' is not an export format; use megatron, torchtitan or deepspeed");
    t.export_to = *e;
  }
  std::string target = flags.target;
  if (target.empty()) target = t.export_to ? to_string(*t.export_to) : "any";
  auto parsed = parse_target(target);
  HEDDLE_TRY(parsed);
  t.target = *parsed;
  // The reserve is the allocator allowance's fixed part (DeviceProfile::runtime_bytes: the CUDA
  // context, NCCL and cuBLAS buffers), not memory taken off on top of it: by default the
  // device's own, given, it replaces that part on every kind; fragmentation is charged either way.
  t.reserve_bytes = cluster.device.runtime_bytes;
  if (!flags.memory_reserve.empty()) {
    t.reserve_bytes = 0;
    if (flags.memory_reserve != "0") {
      auto r = parse_bytes(flags.memory_reserve, "--memory-reserve");
      HEDDLE_TRY(r);
      t.reserve_bytes = *r;
    }
    const double memory = cluster.device.memory_bytes;
    if (t.reserve_bytes >= memory)
      return Diagnostic("--memory-reserve " + human_bytes(t.reserve_bytes) +
                        " leaves nothing of the " + human_bytes(memory) +
                        " per device; give a smaller reserve");
    cluster.for_each_device([&](cost::DeviceProfile& d) { d.runtime_bytes = t.reserve_bytes; });
  }
  o.pins = target_pins(t.target, o.pins);
  if (t.target != Target::kAny) {
    // Pins the target cannot run, or a forward plan for a training stack: say why up front.
    if (auto ok = expressible(t.target, o.pins, {o.train, false}); !ok.ok())
      return Diagnostic("--target " + target + ": " + ok.error().message);
    const bool train = o.train;
    const Target target_stack = t.target;
    o.admits = [train, target_stack](const StrategySpec& spec, bool intra_op_stages) {
      return expressible(target_stack, spec, {train, intra_op_stages}).ok();
    };
  }
  return t;
}

void add_target_json(nlohmann::json& j, const PlanTarget& t, const ExportPlan& best) {
  j["target"] = to_string(t.target);
  j["memory_reserve_bytes"] = t.reserve_bytes;
  nlohmann::json runnable = nlohmann::json::array();
  for (auto s : runnable_by(best.spec, best.kind)) runnable.push_back(to_string(s));
  j["runnable_by"] = runnable;
  j["rank_groups"] = rank_groups(best.spec);
}

std::string runnable_text(const ExportPlan& best) {
  std::vector<std::string> names;
  for (auto s : runnable_by(best.spec, best.kind)) names.push_back(to_string(s));
  return names.empty() ? "none" : join(names, ", ");
}

}  // namespace heddle::exporting
