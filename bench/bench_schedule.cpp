// Pipeline schedule search benchmark: search time, makespan, period and the gap to the lower
// bound for every built-in placement on 4 to 32 devices and 4 to 256 micro-batches, against the
// best baseline that applies and fits the same memory. Prints a markdown table.
//
// Usage: bench_schedule [--quick]   (--quick: 4 and 8 devices only)
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "heddle/pipeline/Baselines.h"
#include "heddle/pipeline/BuiltinPlacements.h"
#include "heddle/pipeline/ScheduleSearch.h"
#include "heddle/pipeline/Validate.h"

using namespace heddle::pipeline;

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<int> device_counts = quick ? std::vector<int>{4, 8} : std::vector<int>{4, 8, 16, 32};
  fmt::print(
      "| placement | devices | micro-batches | memory | search time (s) | makespan | lower bound "
      "| gap | period | period bound | best baseline | baseline makespan | method |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  double worst_time = 0;
  for (const char* name :
       {"vshape", "interleaved:2", "vshape-zb", "xshape", "mshape", "kshape", "nnshape"}) {
    for (int p : device_counts) {
      auto pl = builtin_placement(name, p);
      if (!pl.ok()) continue;
      for (int m : {4, 16, 64, 256}) {
        // Twice the activations 1F1B keeps on its first device, per device.
        const double memory = std::max(2.0 * p, minimum_memory(*pl, m));
        auto t0 = std::chrono::steady_clock::now();
        auto r = search_schedule(*pl, m, memory);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!r.ok()) {
          fmt::print("| {} | {} | {} | {} | error: {} |\n", name, p, m, memory, r.error().message);
          continue;
        }
        worst_time = std::max(worst_time, secs);
        std::string best_name = "-";
        double best = std::numeric_limits<double>::infinity();
        for (const auto& b : applicable_baselines(*pl, m)) {
          if (b == "sequential") continue;
          auto s = build_baseline(b, *pl, m);
          if (!s.ok() || !validate_schedule(*pl, s->schedule, memory).ok()) continue;
          double ms = compute_stats(*pl, s->schedule).makespan;
          if (ms < best) {
            best = ms;
            best_name = b;
          }
        }
        fmt::print(
            "| {} | {} | {} | {} | {:.3f} | {} | {} | {:.1f}% | {:.3g} | {} | {} | {} | {} |\n",
            name, p, m, memory, secs, r->makespan, r->lower_bound,
            100.0 * (r->makespan - r->lower_bound) / r->lower_bound, r->period,
            r->period_lower_bound, best_name,
            best_name == "-" ? std::string("-") : fmt::format("{}", best), r->method);
      }
    }
  }
  fmt::print("\nslowest search: {:.3f} s\n", worst_time);
  return 0;
}
