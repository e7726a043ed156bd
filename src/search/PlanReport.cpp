#include "heddle/search/PlanReport.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "heddle/cost/StepReport.h"
#include "heddle/support/Strings.h"

namespace heddle::search {

nlohmann::json stage_meshes_json(const cost::SimulationResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : r.stages)
    out.push_back({{"dp", s.dp},
                   {"tp", s.tp},
                   {"devices", s.devices},
                   {"device", s.device},
                   {"micro_batch", s.micro_batch},
                   {"layers", s.layers}});
  return out;
}

nlohmann::json plan_json(const ConfigResult& c) {
  const auto& r = c.sim;
  return {{"strategy", r.strategy},
          {"step_time_s", r.step_time_s},
          {"mfu", r.mfu},
          {"tflops_per_device", r.tflops_per_device},
          {"published_mfu", r.published_mfu},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"memory_limit_bytes", r.memory_limit_bytes},
          {"bubble_fraction", r.bubble_fraction},
          {"comm_bytes", r.comm_bytes},
          {"stages", r.pp},
          {"devices", r.devices},
          {"energy_j", r.energy_j},
          {"stage_planner", c.stage_planner},
          {"feasible", r.feasible},
          {"stage_meshes", stage_meshes_json(r)}};
}

Result<std::vector<ComparedPlan>> price_compared(const std::vector<std::string>& given,
                                                 const model::ScalableModel& model,
                                                 const cost::Cluster& cluster, bool train,
                                                 bool overlap) {
  std::vector<ComparedPlan> out;
  for (const std::string& text : given) {
    auto fail = [&text](const Diagnostic& d) {
      return Diagnostic("--compare " + text + ": " + d.message);
    };
    auto spec = StrategySpec::parse(text);
    if (!spec.ok()) return fail(spec.error());
    if (spec->auto_search)
      return fail(Diagnostic("give explicit degrees (dp=..,tp=..,pp=..) to compare with the plan"));
    cost::Cluster used = cluster;
    if (spec->devices() < cluster.count) used.count = spec->devices();
    cost::SimulateOptions so;
    so.train = train;
    so.overlap = overlap;
    auto sim = cost::simulate(model, used, *spec, so);
    if (!sim.ok()) return fail(sim.error());
    out.push_back({text, std::move(*sim)});
  }
  return out;
}

namespace {

nlohmann::json difference_json(const cost::StepBreakdown& a, const cost::StepBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  auto ea = a.entries(), eb = b.entries();
  for (size_t i = 0; i < ea.size(); ++i) j[ea[i].key] = ea[i].seconds - eb[i].seconds;
  return j;
}

// `2.3 s (+0.41 s, 1.18x the plan)`.
std::string gap_text(const cost::SimulationResult& r, const cost::SimulationResult& plan) {
  return fmt::format("{:.4g} s ({:+.4g} s, {:.2f}x the plan)", r.step_time_s,
                     r.step_time_s - plan.step_time_s, r.step_time_s / plan.step_time_s);
}

std::map<std::string, std::string> strategy_keys(const std::string& s) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string part = s.substr(start, end - start);
    size_t eq = part.find('=');
    if (eq != std::string::npos) out[part.substr(0, eq)] = part.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

}  // namespace

nlohmann::json compare_json(const std::vector<ComparedPlan>& compared,
                            const cost::SimulationResult& plan) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : compared) {
    const auto& r = c.sim;
    out.push_back({{"given", c.given},
                   {"strategy", r.strategy},
                   {"devices", r.devices},
                   {"step_time_s", r.step_time_s},
                   {"feasible", r.feasible},
                   {"peak_memory_bytes", r.peak_memory_bytes},
                   {"mfu", r.mfu},
                   {"breakdown", cost::breakdown_json(r.breakdown)},
                   {"difference", difference_json(r.breakdown, plan.breakdown)},
                   {"slowdown", r.step_time_s / plan.step_time_s},
                   {"why", cost::explain_difference(r.breakdown, plan.breakdown)}});
  }
  return out;
}

std::string compare_text(const std::vector<ComparedPlan>& compared,
                         const cost::SimulationResult& plan) {
  if (compared.empty()) return "";
  std::string out = fmt::format("\n{:<32} {:>12}", "compare (seconds per device)", "plan");
  for (size_t i = 0; i < compared.size(); ++i)
    out += fmt::format(" {:>12}", fmt::format("yours #{}", i + 1));
  out += "\n";
  const auto plan_rows = plan.breakdown.entries();
  for (size_t k = 0; k < plan_rows.size(); ++k) {
    bool any = plan_rows[k].seconds > 0;
    for (const auto& c : compared) any = any || c.sim.breakdown.entries()[k].seconds > 0;
    if (!any) continue;
    out += fmt::format("  {:<30} {:>12.4g}", plan_rows[k].name, plan_rows[k].seconds);
    for (const auto& c : compared)
      out += fmt::format(" {:>12.4g}", c.sim.breakdown.entries()[k].seconds);
    out += "\n";
  }
  out += fmt::format("  {:<30} {:>12.4g}", "step time", plan.step_time_s);
  for (const auto& c : compared) out += fmt::format(" {:>12.4g}", c.sim.step_time_s);
  out += fmt::format("\n  {:<30} {:>12}", "peak memory", human_bytes(plan.peak_memory_bytes));
  for (const auto& c : compared)
    out += fmt::format(" {:>12}", human_bytes(c.sim.peak_memory_bytes));
  out += "\n";
  out += fmt::format("  plan     {}\n", plan.strategy);
  for (size_t i = 0; i < compared.size(); ++i) {
    const auto& r = compared[i].sim;
    out += fmt::format("  yours #{} {}{}\n", i + 1, r.strategy,
                       r.feasible ? "" : " (does not fit in memory)");
    out += fmt::format("           {}\n           why (yours minus the plan, per device): {}\n",
                       gap_text(r, plan), cost::explain_difference(r.breakdown, plan.breakdown));
  }
  return out;
}

std::string strategy_difference(const std::string& a, const std::string& b) {
  auto ka = strategy_keys(a), kb = strategy_keys(b);
  std::vector<std::string> diffs;
  for (const auto& [k, v] : ka) {
    auto it = kb.find(k);
    std::string other = it == kb.end() ? "unset" : it->second;
    if (other != v) diffs.push_back(fmt::format("{} {} vs {}", k, v, other));
  }
  for (const auto& [k, v] : kb)
    if (!ka.count(k)) diffs.push_back(fmt::format("{} unset vs {}", k, v));
  return join(diffs, ", ");
}

std::string ranking_text(const std::vector<ConfigResult>& ranking) {
  std::string out =
      fmt::format("\n{:<74} {:>10} {:>7} {:>12}\n", "ranking", "step (s)", "MFU", "memory");
  for (size_t i = 0; i < ranking.size(); ++i) {
    const auto& r = ranking[i].sim;
    out += fmt::format("{:<74} {:>10.4g} {:>6.1f}% {:>12}\n", r.strategy, r.step_time_s,
                       100 * r.mfu, human_bytes(r.peak_memory_bytes));
    if (i == 0) continue;
    const auto& above = ranking[i - 1].sim;
    if (std::abs(r.step_time_s - above.step_time_s) > 1e-3 * above.step_time_s) continue;
    std::string mem = r.peak_memory_bytes < above.peak_memory_bytes ? "this one needs less memory"
                      : r.peak_memory_bytes > above.peak_memory_bytes
                          ? "the one above needs less memory"
                          : "equal memory";
    out += fmt::format("  ties with the row above: {}; {}\n",
                       strategy_difference(r.strategy, above.strategy), mem);
  }
  return out;
}

nlohmann::json ranking_json(const std::vector<ConfigResult>& ranking) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : ranking)
    out.push_back({{"strategy", c.sim.strategy},
                   {"step_time_s", c.sim.step_time_s},
                   {"mfu", c.sim.mfu},
                   {"peak_memory_bytes", c.sim.peak_memory_bytes},
                   {"energy_j", c.sim.energy_j},
                   {"stage_planner", c.stage_planner}});
  return out;
}

}  // namespace heddle::search
