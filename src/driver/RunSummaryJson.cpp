#include "heddle/driver/RunSummaryJson.h"

namespace heddle::driver {

nlohmann::json summary_json(const RunSummary& s, const std::string& backend, bool train) {
  const CheckErrors* c = s.check;
  nlohmann::json j = {{"ok", c == nullptr || c->ok},
                      {"devices", s.mesh.num_devices()},
                      {"mesh", s.mesh.to_string()},
                      {"strategy", s.strategy},
                      {"wall_time_s", s.result.wall_time_s()},
                      {"collectives", s.stats.collectives},
                      {"reshards", s.reshards},
                      {"backend", backend},
                      {"output_digest", s.digest}};
  if (s.stages == 0) {  // the split report (describe_split)
    j["idle_axes"] = s.idle_axes;
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& u : s.unsplit_ops) {
      nlohmann::json dims = nlohmann::json::array();
      for (const auto& [dim, reason, detail] : u.dims)
        dims.push_back({{"dim", dim}, {"reason", reason}, {"detail", detail}});
      ops.push_back({{"op", u.op}, {"result", u.result}, {"axis", u.axis}, {"dims", dims}});
    }
    j["unsplit_ops"] = ops;
  }
  if (s.stages > 0) {
    j["pipeline"] = {
        {"stages", s.stages}, {"micro_batches", s.micro_batches}, {"schedule", s.schedule}};
    if (!s.recompute.empty()) {
      j["pipeline"]["recompute"] = s.recompute;
      j["pipeline"]["recompute_kernel_calls"] = s.counts.recompute_calls;
      j["pipeline"]["kernel_calls"] = s.counts.kernel_calls;
    }
  }
  if (s.feed_bytes) {
    j["rank_feed_bytes_max"] = s.feed_bytes->first;
    j["model_feed_bytes"] = s.feed_bytes->second;
  }
  if (c) {
    j["max_abs_error"] = c->max_abs;
    j["max_rel_error"] = c->max_rel;
    j["reference_time_s"] = c->reference_time_s;
    j["adamw_elements_compared_by_gradient"] = c->adamw_skipped;
  }
  if (train) j["loss"] = s.result.losses;
  if (!s.params_digest.empty()) j["params_digest"] = s.params_digest;
  j["step_times_s"] = s.result.step_times_s;
  j["median_step_s"] = s.result.median_step_s();
  j["step_cpu_s"] = s.result.step_cpu_s;
  j["median_step_cpu_s"] = s.result.median_step_cpu_s();
  if (!s.peak_bytes_per_device.empty()) j["peak_bytes_per_device"] = s.peak_bytes_per_device;
  if (!s.held_bytes_per_device.empty()) j["held_bytes_per_device"] = s.held_bytes_per_device;
  if (!s.predicted_peak_bytes_per_device.empty())
    j["predicted_peak_bytes_per_device"] = s.predicted_peak_bytes_per_device;
  if (!s.profile.empty()) {
    j["profile"] = nlohmann::json::array();
    for (const ProfileRow& r : s.profile)
      j["profile"].push_back(
          {{"kernel", r.label}, {"calls", r.calls}, {"seconds", r.seconds}, {"share", r.share}});
  }
  return j;
}

}  // namespace heddle::driver
