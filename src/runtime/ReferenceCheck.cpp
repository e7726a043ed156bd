#include "heddle/runtime/ReferenceCheck.h"

#include <chrono>
#include <cmath>

namespace heddle {

namespace {

// Below 1e-5 (1,000 x AdamW's eps) the normalized step lr * g / (|g| + eps) turns fp32 rounding
// of g into visible changes.
constexpr double kAdamWNoise = 1e-5;

// The smallest magnitude, as a fraction of the tensor's largest, that relative errors are measured
// against (CheckOptions::rtol).
constexpr double kScaleFloor = 1e-2;

}  // namespace

ReferenceCheck::ReferenceCheck(const Graph& g, std::vector<ParamUpdate> updates, TensorMap params,
                               std::vector<Tensor> inputs, const CheckOptions& options)
    : g_(g),
      updates_(std::move(updates)),
      params_(std::move(params)),
      inputs_(std::move(inputs)),
      options_(options),
      interp_(g, InterpreterOptions{.seed = options.seed, .blas_threads = 1}) {
  if (options.adamw)
    for (const auto& u : updates_) adamw_grad_[u.updated] = u.grad;
}

void ReferenceCheck::compare(const Tensor& want, const Tensor& got) {
  // fp32 rounding in a sum is relative to the size of its terms, not of its result: an element
  // that cancels down to a small value carries the rounding of its large neighbours. Relative
  // errors are therefore measured against at least kScaleFloor of the tensor's largest magnitude.
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.is_int() ? static_cast<double>(want.i64()[i])
                                                    : static_cast<double>(want.f32()[i])));
  const double floor = std::max(kScaleFloor * (std::isfinite(scale) ? scale : 0.0), 1e-6);
  for (int64_t i = 0; i < want.numel(); ++i) {
    double x = want.is_int() ? want.i64()[i] : want.f32()[i];
    double y = got.is_int() ? got.i64()[i] : got.f32()[i];
    double err = std::fabs(x - y);
    if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
    double size = std::max(std::fabs(x), floor);
    errors_.max_abs = std::max(errors_.max_abs, err);
    errors_.max_rel = std::max(errors_.max_rel, err / size);
    if (err > options_.atol + options_.rtol * size) errors_.ok = false;
  }
}

Status ReferenceCheck::check_step(int step, const TensorMap& got) {
  for (ValueId p : g_.params()) interp_.set_param(p, params_.at(p));
  auto t1 = std::chrono::steady_clock::now();
  auto want = interp_.run(inputs_, step);
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
  // The next step starts from the partitioned run's parameters, as the run's own does.
  for (const auto& u : updates_) {
    params_.insert_or_assign(u.param, got.at(u.updated));
    for (const auto& st : u.state) params_.insert_or_assign(st.first, got.at(st.second));
  }
  return {};
}

}  // namespace heddle
