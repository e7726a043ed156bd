// A run's summary for people (heddle/driver/RunSummaryText.h).
#include "heddle/driver/RunSummaryText.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "heddle/support/Strings.h"

namespace heddle::driver {

namespace {

// With --check: the reference's time, the largest errors and the verdict.
std::string check_text(const CheckErrors& c, const RunArguments& a) {
  std::string out =
      fmt::format("reference  {:.4f} s (single-device interpreter)\n", c.reference_time_s);
  out += fmt::format("max error  abs {:.3g}, rel {:.3g} (tolerance abs {:g} + rel {:g})\n",
                     c.max_abs, c.max_rel, a.atol, a.rtol);
  if (c.adamw_skipped > 0)
    out += fmt::format(
        "           {} AdamW-updated weights with gradients near zero (below 1e-5 or 1e-3 of "
        "their tensor's largest) were compared through their gradients only\n",
        c.adamw_skipped);
  if (c.kinks_flipped > 0)
    out += fmt::format(
        "           {} ReLU inputs within fp32 rounding of zero were taken on the run's side\n",
        c.kinks_flipped);
  out += fmt::format("check      {}\n", c.ok ? std::string("ok: every output") +
                                                   (a.train ? " and updated parameter" : "") +
                                                   " matches the reference"
                                             : std::string("MISMATCH"));
  return out;
}

// With --profile: device 0's timed step by kernel, the slowest kProfileRows groups and the rest
// in one line.
std::string profile_text(const std::vector<ProfileRow>& rows) {
  constexpr size_t kProfileRows = 20;
  double total = 0;
  int64_t calls = 0;
  for (const ProfileRow& r : rows) {
    total += r.seconds;
    calls += r.calls;
  }
  std::string out = fmt::format(
      "profile    device 0, per timed step: {:.2f} ms in {} instructions\n"
      "           {:>9}  {:>6}  {:>5}  kernel\n",
      total * 1e3, calls, "ms", "share", "calls");
  for (size_t i = 0; i < rows.size() && i < kProfileRows; ++i)
    out += fmt::format("           {:9.3f}  {:5.1f}%  {:5}  {}\n", rows[i].seconds * 1e3,
                       rows[i].share * 100, rows[i].calls, rows[i].label);
  if (rows.size() > kProfileRows) {
    double rest = 0, share = 0;
    int64_t n = 0;
    for (size_t i = kProfileRows; i < rows.size(); ++i) {
      rest += rows[i].seconds;
      share += rows[i].share;
      n += rows[i].calls;
    }
    out += fmt::format("           {:9.3f}  {:5.1f}%  {:5}  ({} more kinds)\n", rest * 1e3,
                       share * 100, n, rows.size() - kProfileRows);
  }
  return out;
}

}  // namespace

std::string summary_text(const RunSummary& s, const RunArguments& a) {
  std::string out =
      fmt::format("model      {} ({} ops{})\n", s.model_name, s.model_ops,
                  a.train ? ", training step: forward, loss, backward, " + a.optimizer : "");
  out += fmt::format("plan       {}\n", s.note);
  out += fmt::format("devices    {}\n", s.devices_text);
  out += fmt::format(
      "programs   {} kernel calls ({} fused instructions), {} collectives, {} halo "
      "fetches over all devices\n",
      s.stats.kernels, s.stats.fused, s.stats.collectives, s.stats.fetches);
  if (s.reshards > 0)
    out += fmt::format(
        "reshards   {} between the plan's ops (heddle show MODEL --mesh ... --strategy "
        "... lists them)\n",
        s.reshards);
  if (!s.split_text.empty()) out += fmt::format("not split  {}", s.split_text);
  if (s.feed_bytes)
    out += fmt::format(
        "shards     the largest rank holds {} of the {} bytes of parameters and inputs\n",
        s.feed_bytes->first, s.feed_bytes->second);
  const size_t steps = s.result.step_times_s.size();
  out += fmt::format("wall time  {:.4f} s{}\n", s.result.wall_time_s(),
                     a.train || steps > 1 ? fmt::format(" for {} steps (median {:.4f} s)", steps,
                                                        s.result.median_step_s())
                                          : "");
  if (!s.peak_bytes_per_device.empty()) {
    auto largest = [](const auto& v) {
      return static_cast<double>(*std::max_element(v.begin(), v.end()));
    };
    out += fmt::format("memory     largest device peak {} of live tiles",
                       human_bytes(largest(s.peak_bytes_per_device)));
    if (!s.held_bytes_per_device.empty())
      out += fmt::format(", {} with the parameters and inputs it reads",
                         human_bytes(largest(s.held_bytes_per_device)));
    out += "\n";
    if (!s.predicted_peak_bytes_per_device.empty())
      out += fmt::format(
          "           the cost model predicts {} (simulate --executor, the cpu cluster at {} "
          "devices)\n",
          human_bytes(largest(s.predicted_peak_bytes_per_device)),
          s.predicted_peak_bytes_per_device.size());
    else if (!s.no_prediction.empty())
      out += fmt::format("           no cost-model prediction: {}\n", s.no_prediction);
  }
  if (!s.profile.empty()) out += profile_text(s.profile);
  if (s.check) out += check_text(*s.check, a);
  return out;
}

std::optional<Diagnostic> check_mismatch(const RunSummary& s) {
  if (!s.check || s.check->ok) return std::nullopt;
  return Diagnostic(fmt::format(
      "outputs differ from the reference beyond tolerance (max abs {:.3g}, max rel {:.3g})",
      s.check->max_abs, s.check->max_rel));
}

std::optional<std::string> diverged_loss(const RunSummary& s) {
  auto k = s.result.first_nonfinite_loss();
  if (!k) return std::nullopt;
  const double loss = s.result.losses[*k - 1];
  return fmt::format("warning: the loss is {} at step {}: the run diverged (try a smaller --lr){}",
                     std::isnan(loss) ? "NaN"
                     : loss > 0       ? "+inf"
                                      : "-inf",
                     *k, s.check ? "; --check compares NaN with NaN as equal" : "");
}

}  // namespace heddle::driver
