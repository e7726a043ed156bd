#include "RunReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "heddle/driver/RunSummaryJson.h"
#include "heddle/support/Strings.h"

namespace heddle::cli {

int report_run(const RunOptions& o, const RunSummary& s) {
  const CheckErrors* c = s.check;
  if (auto k = s.result.first_nonfinite_loss())
    report_note(LogLevel::kWarn, "loss",
                fmt::format("warning: the loss is {} at step {}: the run diverged (try a smaller "
                            "--lr){}",
                            std::isnan(s.result.losses[*k - 1]) ? "NaN"
                            : s.result.losses[*k - 1] > 0       ? "+inf"
                                                                : "-inf",
                            *k, c ? "; --check compares NaN with NaN as equal" : ""));
  if (o.json) {
    const nlohmann::json j = driver::summary_json(s, o.backend, o.train);
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops{})\n", s.model_name, s.model_ops,
               o.train ? ", training step: forward, loss, backward, " + o.optimizer : "");
    fmt::print("plan       {}\n", s.note);
    fmt::print("devices    {}\n", s.devices_text);
    fmt::print(
        "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
        "fetches over all devices\n",
        s.stats.kernels, s.stats.fused, s.stats.collectives, s.stats.fetches);
    if (s.reshards > 0)
      fmt::print(
          "reshards   {} inserted by propagation (heddle show MODEL --mesh ... --strategy "
          "... lists them)\n",
          s.reshards);
    if (!s.split_text.empty()) fmt::print("not split  {}", s.split_text);
    if (s.feed_bytes)
      fmt::print("shards     the largest rank holds {} of the {} bytes of parameters and inputs\n",
                 s.feed_bytes->first, s.feed_bytes->second);
    const size_t steps = s.result.step_times_s.size();
    fmt::print("wall time  {:.4f} s{}\n", s.result.wall_time_s(),
               o.train || steps > 1
                   ? fmt::format(" for {} steps (median {:.4f} s)", steps, s.result.median_step_s())
                   : "");
    if (!s.peak_bytes_per_device.empty())
      fmt::print("memory     largest device peak {} of live tiles\n",
                 human_bytes(static_cast<double>(*std::max_element(
                     s.peak_bytes_per_device.begin(), s.peak_bytes_per_device.end()))));
    if (c) {
      fmt::print("reference  {:.4f} s (single-device interpreter)\n", c->reference_time_s);
      fmt::print("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n", c->max_abs,
                 c->max_rel, o.atol, o.rtol);
      if (c->adamw_skipped > 0)
        fmt::print(
            "           {} AdamW-updated weights with gradients near zero (below 1e-5 or 1e-3 of "
            "their tensor's largest) were compared through their gradients only\n",
            c->adamw_skipped);
      fmt::print("check      {}\n", c->ok ? std::string("ok: every output") +
                                                (o.train ? " and updated parameter" : "") +
                                                " matches the reference"
                                          : std::string("MISMATCH"));
    }
  }
  if (c && !c->ok)
    return report_failure(Diagnostic(fmt::format(
                              "outputs differ from the reference beyond tolerance (max abs {:.3g}, "
                              "max rel {:.3g})",
                              c->max_abs, c->max_rel)),
                          FailureKind::kCheckMismatch);
  return 0;
}

}  // namespace heddle::cli
