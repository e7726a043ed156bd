// heddle.schedule: a pipeline schedule searched (or a baseline built) for a placement, with its
// blocks for plotting.
#include <pybind11/stl.h>

#include <chrono>

#include "Bindings.h"
#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/PlacementJson.h"
#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/pipeline/Timeline.h"
#include "heddle/pipeline/Validate.h"

namespace heddle::python {

namespace pl = heddle::pipeline;

void bind_schedule(py::module_& m) {
  m.def("schedule", [](const std::string& placement_text, int devices, int micro_batches,
                       double memory, const std::string& baseline, double time_limit) {
    const bool file = placement_text.find('/') != std::string::npos ||
                      (placement_text.size() > 5 && placement_text.ends_with(".json"));
    pl::BlockPlacement p = pl::is_builtin_placement(placement_text) || !file
                               ? unwrap(pl::builtin_placement(placement_text, devices))
                               : unwrap(pl::load_placement_file(placement_text, devices));
    unwrap(pl::check_request(p, micro_batches, memory));
    pl::Schedule schedule;
    std::string method;
    double period = 0, search_time = 0;
    if (!baseline.empty()) {
      auto t0 = std::chrono::steady_clock::now();
      auto b = unwrap(pl::build_baseline(baseline, p, micro_batches));
      search_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      schedule = b.schedule;
      method = "baseline " + b.name;
      period = b.period;
    } else {
      pl::ScheduleSearchOptions opt;
      opt.time_limit_s = time_limit;
      auto r =
          interruptible([&] { return unwrap(pl::search_schedule(p, micro_batches, memory, opt)); });
      schedule = r.schedule;
      method = "searched (" + r.method + ")";
      period = r.period;
      search_time = r.search_time_s;
    }
    auto valid = pl::validate_schedule(p, schedule, memory);
    auto stats = pl::compute_stats(p, schedule);
    py::dict d;
    d["makespan"] = stats.makespan;
    d["period"] = period;
    d["bubble_fraction"] = stats.bubble_fraction;
    d["peak_memory"] = stats.peak_memory;
    d["lower_bound"] = pl::makespan_lower_bound(p, micro_batches);
    d["search_time_s"] = search_time;
    d["valid"] = valid.ok();
    d["method"] = method;
    d["placement"] = p.name;
    d["devices"] = p.num_devices;
    d["micro_batches"] = micro_batches;
    d["memory_limit"] = memory;
    py::list blocks;  // one entry per (micro-batch, block) and device it occupies
    for (int mb = 0; mb < schedule.micro_batches; ++mb)
      for (int b = 0; b < schedule.blocks; ++b) {
        const pl::Block& blk = p.blocks[static_cast<size_t>(b)];
        for (int dev : blk.devices) {
          py::dict e;
          e["micro_batch"] = mb;
          e["block"] = blk.name;
          e["type"] = blk.type;
          e["device"] = dev;
          e["start"] = schedule.at(mb, b);
          e["end"] = schedule.at(mb, b) + blk.span;
          blocks.append(e);
        }
      }
    d["blocks"] = blocks;
    d["timeline"] = pl::render_timeline(p, schedule, 400);
    return d;
  });
}

}  // namespace heddle::python
