#include "StepTrace.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "heddle/pipeline/ChromeTrace.h"

namespace heddle::cost {

namespace {

nlohmann::json span(const std::string& name, const char* cat, double ts, double dur, int d) {
  return {{"name", name},     {"cat", cat}, {"ph", "X"}, {"ts", ts * 1e6},
          {"dur", dur * 1e6}, {"pid", d},   {"tid", d}};
}

// The categories inside one block, laid end to end from `start` (Perfetto nests them under the
// block): compute first, then what the block waits on.
void block_spans(nlohmann::json& events, const StepBreakdown& parts, double start, int d) {
  double t = start;
  for (const auto& e : parts.entries()) {
    if (e.overlapped || e.seconds <= 0) continue;
    events.push_back(span(e.name, "breakdown", t, e.seconds, d));
    t += e.seconds;
  }
}

}  // namespace

std::string step_trace(const StepTraceInput& in) {
  const pipeline::BlockPlacement& pl = *in.pl;
  const pipeline::Schedule& sch = *in.schedule;
  const SimulationResult& res = *in.res;
  auto trace = nlohmann::json::parse(pipeline::chrome_trace_json(pl, sch));
  auto& events = trace["traceEvents"];
  for (auto& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const StageResult& s = res.stages[e["pid"].get<size_t>()];
      e["args"]["name"] = fmt::format("stage {} (dp {} x tp {}, {} devices)", e["pid"].get<int>(),
                                      s.dp, s.tp, s.devices);
    }
  for (int d = 0; d < static_cast<int>(res.stages.size()); ++d) {
    const StageResult& s = res.stages[static_cast<size_t>(d)];
    std::vector<std::pair<double, int>> starts;
    for (int op = 0; op < sch.num_ops(); ++op) {
      const auto& devs = pl.blocks[static_cast<size_t>(op % sch.blocks)].devices;
      if (std::find(devs.begin(), devs.end(), d) != devs.end())
        starts.push_back({sch.start[static_cast<size_t>(op)], op});
    }
    std::sort(starts.begin(), starts.end());
    // Named spans inside every block, and the bubbles between blocks.
    double free_at = 0;
    for (auto [ts, op] : starts) {
      const size_t b = static_cast<size_t>(op % sch.blocks);
      if (ts > free_at + 1e-12)
        events.push_back(span("bubble", "breakdown", free_at, ts - free_at, d));
      block_spans(events, (*in.block_parts)[b], ts, d);
      free_at = std::max(free_at, ts + pl.blocks[b].span);
    }
    double t = (*in.end)[static_cast<size_t>(d)];
    for (auto [name, dur] : {std::pair<const char*, double>{
                                 "gradient reduction", (*in.tail_sync)[static_cast<size_t>(d)]},
                             {"optimizer", (*in.tail_opt)[static_cast<size_t>(d)]}}) {
      if (dur <= 0) continue;
      events.push_back(span(name, "step", t, dur, d));
      t += dur;
    }
    if (res.step_time_s > t + 1e-12)
      events.push_back(span("bubble", "breakdown", t, res.step_time_s - t, d));
    double mem = s.state_bytes + s.buffer_bytes + s.allocator_bytes;
    events.push_back({{"name", "memory (GiB)"},
                      {"ph", "C"},
                      {"ts", 0},
                      {"pid", d},
                      {"args", {{"GiB", mem / (1 << 30)}}}});
    for (auto [ts, op] : starts) {
      mem += pl.blocks[static_cast<size_t>(op % sch.blocks)].memory;
      events.push_back({{"name", "memory (GiB)"},
                        {"ph", "C"},
                        {"ts", ts * 1e6},
                        {"pid", d},
                        {"args", {{"GiB", mem / (1 << 30)}}}});
    }
  }
  return trace.dump(1);
}

}  // namespace heddle::cost
