#include "heddle/pipeline/ChromeTrace.h"

#include <nlohmann/json.hpp>

namespace heddle::pipeline {

std::string chrome_trace_json(const BlockPlacement& p, const Schedule& s) {
  constexpr double kMicrosPerUnit = 1e6;
  nlohmann::json events = nlohmann::json::array();
  for (int d = 0; d < p.num_devices; ++d) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", d},
                      {"tid", d},
                      {"args", {{"name", "device " + std::to_string(d)}}}});
  }
  for (int op = 0; op < s.num_ops(); ++op) {
    const Block& b = p.blocks[op % s.blocks];
    const int micro = op / s.blocks;
    for (int d : b.devices) {
      events.push_back(
          {{"name", b.name + " #" + std::to_string(micro)},
           {"cat", b.type},
           {"ph", "X"},
           {"ts", s.start[op] * kMicrosPerUnit},
           {"dur", b.span * kMicrosPerUnit},
           {"pid", d},
           {"tid", d},
           {"args", {{"micro_batch", micro}, {"block", b.name}, {"memory", b.memory}}}});
    }
  }
  nlohmann::json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump(1);
}

}  // namespace heddle::pipeline
