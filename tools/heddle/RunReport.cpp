#include "RunReport.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

namespace heddle::cli {

namespace {

// Below 1e-5 (1,000 x AdamW's eps) the normalized step lr * g / (|g| + eps) turns fp32 rounding
// of g into visible changes.
constexpr double kAdamWNoise = 1e-5;

}  // namespace

ReferenceCheck::ReferenceCheck(const Graph& g, const RunOptions& o,
                               const std::vector<ParamUpdate>& updates)
    : g_(g), o_(o), interp_(g, InterpreterOptions{.seed = o.seed, .blas_threads = 1}) {
  if (o.optimizer == "adamw")
    for (const auto& u : updates) adamw_grad_[u.updated] = u.grad;
}

void ReferenceCheck::compare(const Tensor& want, const Tensor& got) {
  for (int64_t i = 0; i < want.numel(); ++i) {
    double x = want.is_int() ? want.i64()[i] : want.f32()[i];
    double y = got.is_int() ? got.i64()[i] : got.f32()[i];
    double err = std::fabs(x - y);
    if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
    errors_.max_abs = std::max(errors_.max_abs, err);
    errors_.max_rel = std::max(errors_.max_rel, err / std::max(std::fabs(x), 1e-6));
    if (err > o_.atol + o_.rtol * std::fabs(x)) errors_.ok = false;
  }
}

Status ReferenceCheck::check_step(int s, const TensorMap& params, const std::vector<Tensor>& inputs,
                                  const TensorMap& got) {
  for (ValueId p : g_.params()) interp_.set_param(p, params.at(p));
  auto t1 = std::chrono::steady_clock::now();
  auto want = interp_.run(inputs, s);
  errors_.reference_time_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  HEDDLE_TRY(want);
  std::map<ValueId, size_t> out_index;
  for (size_t k = 0; k < g_.outputs().size(); ++k) out_index[g_.outputs()[k]] = k;
  for (size_t k = 0; k < g_.outputs().size(); ++k) {
    ValueId v = g_.outputs()[k];
    auto adam = adamw_grad_.find(v);
    auto grad_at = adam == adamw_grad_.end() ? out_index.end() : out_index.find(adam->second);
    if (grad_at == out_index.end()) {
      compare((*want)[k], got.at(v));
      continue;
    }
    const Tensor& grad = (*want)[grad_at->second];
    double scale = 0;
    for (int64_t i = 0; i < grad.numel(); ++i)
      scale = std::max(scale, std::fabs(static_cast<double>(grad.f32()[i])));
    Tensor want_masked = (*want)[k], got_masked = got.at(v);
    for (int64_t i = 0; i < grad.numel(); ++i)
      if (std::fabs(grad.f32()[i]) <= std::max(1e-3 * scale, kAdamWNoise)) {
        got_masked.f32()[i] = want_masked.f32()[i];
        ++errors_.adamw_skipped;
      }
    compare(want_masked, got_masked);
  }
  return {};
}

int report_run(const RunOptions& o, const Graph& g, const RunSummary& s) {
  const CheckErrors* c = s.check;
  if (o.json) {
    nlohmann::json j = {{"ok", c == nullptr || c->ok}, {"devices", s.mesh.num_devices()},
                        {"mesh", s.mesh.to_string()},  {"strategy", s.strategy},
                        {"wall_time_s", s.wall_s},     {"collectives", s.stats.collectives},
                        {"reshards", s.reshards},      {"backend", o.backend},
                        {"output_digest", s.digest}};
    if (s.stages > 0)
      j["pipeline"] = {
          {"stages", s.stages}, {"micro_batches", s.micro_batches}, {"schedule", s.schedule}};
    if (s.feed_bytes) {
      j["rank_feed_bytes_max"] = s.feed_bytes->first;
      j["model_feed_bytes"] = s.feed_bytes->second;
    }
    if (!s.peak_bytes_per_device.empty()) j["peak_bytes_per_device"] = s.peak_bytes_per_device;
    if (c) {
      j["max_abs_error"] = c->max_abs;
      j["max_rel_error"] = c->max_rel;
      j["reference_time_s"] = c->reference_time_s;
      j["adamw_elements_compared_by_gradient"] = c->adamw_skipped;
    }
    if (o.train) j["loss"] = s.losses;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} ops{})\n", g.name(), g.num_ops(),
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
    if (s.feed_bytes)
      fmt::print("shards     the largest rank holds {} of the {} bytes of parameters and inputs\n",
                 s.feed_bytes->first, s.feed_bytes->second);
    fmt::print("wall time  {:.4f} s{}\n", s.wall_s,
               o.train ? " for " + std::to_string(s.losses.size()) + " steps" : "");
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
  if (c && !c->ok) {
    std::fprintf(stderr,
                 "error: outputs differ from the reference beyond tolerance "
                 "(max abs %.3g, max rel %.3g)\n",
                 c->max_abs, c->max_rel);
    return 1;
  }
  return 0;
}

}  // namespace heddle::cli
