#include "PlanTarget.h"

#include "Command.h"
#include "heddle/export/RankGroups.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

void add_target_flags(CLI::App* app, TargetFlags& flags) {
  app->add_option("--target", flags.target,
                  "Only plans this stack can run: megatron, torchtitan, deepspeed, heddle or any "
                  "(default: the --export format, else any)");
  app->add_option("--export", flags.export_format,
                  "Print the plan as megatron arguments, a torchtitan TOML or a deepspeed JSON "
                  "(also written to --out DIR)");
  app->add_option("--memory-reserve", flags.memory_reserve,
                  "Memory per device left free for the CUDA context, NCCL buffers and "
                  "fragmentation (default: 5% of it, at least 2GiB, at most a quarter; 0: none)");
}

Result<PlanTarget> apply_target_flags(const TargetFlags& flags, cost::Cluster& cluster,
                                      search::ConfigSearchOptions& o) {
  PlanTarget t;
  if (!flags.export_format.empty()) {
    auto e = exporting::parse_target(flags.export_format);
    if (!e.ok() || *e == exporting::Target::kHeddle || *e == exporting::Target::kAny)
      return Diagnostic("--export '" + flags.export_format +
                        "' is not an export format; use megatron, torchtitan or deepspeed");
    t.export_to = *e;
  }
  std::string target = flags.target;
  if (target.empty()) target = t.export_to ? exporting::to_string(*t.export_to) : "any";
  auto parsed = exporting::parse_target(target);
  HEDDLE_TRY(parsed);
  t.target = *parsed;
  const double memory = cluster.device.memory_bytes;
  if (flags.memory_reserve.empty()) {
    t.reserve_bytes = exporting::default_memory_reserve(memory);
  } else if (flags.memory_reserve != "0") {
    auto r = parse_bytes(flags.memory_reserve, "--memory-reserve");
    HEDDLE_TRY(r);
    t.reserve_bytes = *r;
  }
  if (t.reserve_bytes >= memory)
    return Diagnostic("--memory-reserve " + human_bytes(t.reserve_bytes) +
                      " leaves nothing of the " + human_bytes(memory) +
                      " per device; give a smaller reserve");
  cluster.device.memory_bytes = memory - t.reserve_bytes;
  o.pins = exporting::target_pins(t.target, o.pins);
  if (t.target != exporting::Target::kAny) {
    // Pins the target cannot run, or a forward plan for a training stack: say why up front.
    if (auto ok = exporting::expressible(t.target, o.pins, {o.train, false}); !ok.ok())
      return Diagnostic("--target " + target + ": " + ok.error().message);
    const bool train = o.train;
    const exporting::Target target_stack = t.target;
    o.admits = [train, target_stack](const StrategySpec& spec, bool intra_op_stages) {
      return exporting::expressible(target_stack, spec, {train, intra_op_stages}).ok();
    };
  }
  return t;
}

void add_target_json(nlohmann::json& j, const PlanTarget& t, const exporting::ExportPlan& best) {
  j["target"] = exporting::to_string(t.target);
  j["memory_reserve_bytes"] = t.reserve_bytes;
  nlohmann::json runnable = nlohmann::json::array();
  for (auto s : exporting::runnable_by(best.spec, best.kind))
    runnable.push_back(exporting::to_string(s));
  j["runnable_by"] = runnable;
  j["rank_groups"] = exporting::rank_groups(best.spec);
}

std::string runnable_text(const exporting::ExportPlan& best) {
  std::vector<std::string> names;
  for (auto s : exporting::runnable_by(best.spec, best.kind))
    names.push_back(exporting::to_string(s));
  return names.empty() ? "none" : join(names, ", ");
}

}  // namespace heddle::cli
