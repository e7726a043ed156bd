#include "heddle/runtime/ReferenceCheck.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <variant>

namespace heddle {

namespace {

// Below 1e-5 (1,000 x AdamW's eps) the normalized step lr * g / (|g| + eps) turns fp32 rounding
// of g into visible changes.
constexpr double kAdamWNoise = 1e-5;

// The smallest magnitude, as a fraction of the tensor's largest, that relative errors are measured
// against (CheckOptions::rtol).
constexpr double kScaleFloor = 1e-2;

// A ReLU input within this fraction of its tensor's largest magnitude of zero is within fp32
// rounding of it: a run whose sums round differently may put it on the other side.
constexpr double kKinkBand = 1e-6;

// One ReLU input near zero: the element, and the value that puts it on the other side.
struct Kink {
  ValueId value = -1;
  int64_t index = 0;
  float moved = 0;
  double closeness = 0;  // |x| over its tensor's largest: the most ambiguous first
};

// The inputs of the last run's ReLU gradients (elementwise_grad{fn="relu"}: dy, x) that lie within
// kKinkBand of zero, most ambiguous first, at most `limit`. Values without a producing op (inputs,
// params) are left out: the interpreter sets them, no op.
std::vector<Kink> kinks(const Graph& g, const Interpreter& interp, size_t limit) {
  std::vector<Kink> out;
  std::set<ValueId> seen;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    if (op.kind != OpKind::kElementwiseGrad || op.inputs.size() != 2) continue;
    auto fn = op.attrs.find("fn");
    const std::string* name =
        fn == op.attrs.end() ? nullptr : std::get_if<std::string>(&fn->second);
    if (name == nullptr || *name != "relu") continue;
    ValueId v = op.inputs[1].value;
    if (g.value(v).producer == kNoOp || !seen.insert(v).second) continue;
    const Tensor& x = interp.value(v);
    if (x.is_int()) continue;
    double scale = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      scale = std::max(scale, std::fabs(static_cast<double>(x.f32()[i])));
    if (!(scale > 0) || !std::isfinite(scale)) continue;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float a = x.f32()[i];
      if (std::fabs(a) > kKinkBand * scale) continue;
      const float moved = a != 0.0f ? -a : std::numeric_limits<float>::min();
      out.push_back({v, i, moved, std::fabs(a) / scale});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Kink& a, const Kink& b) { return a.closeness < b.closeness; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

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

double ReferenceCheck::compare(const Tensor& want, const Tensor& got, CheckErrors& e) const {
  // fp32 rounding in a sum is relative to the size of its terms, not of its result: an element
  // that cancels down to a small value carries the rounding of its large neighbours. Relative
  // errors are therefore measured against at least kScaleFloor of the tensor's largest magnitude.
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.is_int() ? static_cast<double>(want.i64()[i])
                                                    : static_cast<double>(want.f32()[i])));
  const double floor = std::max(kScaleFloor * (std::isfinite(scale) ? scale : 0.0), 1e-6);
  double excess = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double x = want.is_int() ? want.i64()[i] : want.f32()[i];
    double y = got.is_int() ? got.i64()[i] : got.f32()[i];
    double err = std::fabs(x - y);
    if (std::isnan(err)) err = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
    double size = std::max(std::fabs(x), floor);
    double tol = options_.atol + options_.rtol * size;
    e.max_abs = std::max(e.max_abs, err);
    e.max_rel = std::max(e.max_rel, err / size);
    if (err > tol) {
      e.ok = false;
      excess += tol > 0 ? (err - tol) / tol : err;
    }
  }
  return excess;
}

double ReferenceCheck::compare_step(const std::vector<Tensor>& want, const TensorMap& got,
                                    CheckErrors& e) const {
  std::map<ValueId, size_t> out_index;
  for (size_t k = 0; k < g_.outputs().size(); ++k) out_index[g_.outputs()[k]] = k;
  double excess = 0;
  for (size_t k = 0; k < g_.outputs().size(); ++k) {
    ValueId v = g_.outputs()[k];
    auto adam = adamw_grad_.find(v);
    auto grad_at = adam == adamw_grad_.end() ? out_index.end() : out_index.find(adam->second);
    if (grad_at == out_index.end()) {
      excess += compare(want[k], got.at(v), e);
      continue;
    }
    const Tensor& grad = want[grad_at->second];
    double scale = 0;
    for (int64_t i = 0; i < grad.numel(); ++i)
      scale = std::max(scale, std::fabs(static_cast<double>(grad.f32()[i])));
    Tensor want_masked = want[k], got_masked = got.at(v);
    for (int64_t i = 0; i < grad.numel(); ++i)
      if (std::fabs(grad.f32()[i]) <= std::max(1e-3 * scale, kAdamWNoise)) {
        got_masked.f32()[i] = want_masked.f32()[i];
        ++e.adamw_skipped;
      }
    excess += compare(want_masked, got_masked, e);
  }
  return excess;
}

Result<std::vector<Tensor>> ReferenceCheck::run_reference(int step) {
  for (ValueId p : g_.params()) interp_.set_param(p, params_.at(p));
  auto t1 = std::chrono::steady_clock::now();
  auto want = interp_.run(inputs_, step);
  errors_.reference_time_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return want;
}

Status ReferenceCheck::check_step(int step, const TensorMap& got) {
  interp_.set_after_op({});
  auto want = run_reference(step);
  HEDDLE_TRY(want);
  CheckErrors e;
  double excess = compare_step(*want, got, e);
  if (!e.ok && options_.kink_tries > 0) {
    // ReLU inputs within rounding of zero, moved across it one at a time; a move is kept when it
    // brings the outputs closer to the run's.
    std::vector<Kink> tries = kinks(g_, interp_, static_cast<size_t>(options_.kink_tries));
    std::vector<Kink> kept;
    interp_.set_after_op([&](ValueId v, Tensor& t) {
      for (const Kink& k : kept)
        if (k.value == v) t.f32()[k.index] = k.moved;
    });
    for (const Kink& k : tries) {
      kept.push_back(k);
      auto moved = run_reference(step);
      if (!moved.ok()) {
        interp_.set_after_op({});
        return moved.error();
      }
      CheckErrors m;
      m.kinks_flipped = static_cast<int64_t>(kept.size());
      double x = compare_step(*moved, got, m);
      if (x >= excess) {
        kept.pop_back();
        continue;
      }
      e = m;
      excess = x;
      if (e.ok) break;
    }
    interp_.set_after_op({});
  }
  errors_.max_abs = std::max(errors_.max_abs, e.max_abs);
  errors_.max_rel = std::max(errors_.max_rel, e.max_rel);
  errors_.ok = errors_.ok && e.ok;
  errors_.adamw_skipped += e.adamw_skipped;
  errors_.kinks_flipped += e.kinks_flipped;
  // The next step starts from the partitioned run's parameters, as the run's own does.
  for (const auto& u : updates_) {
    params_.insert_or_assign(u.param, got.at(u.updated));
    for (const auto& st : u.state) params_.insert_or_assign(st.first, got.at(st.second));
  }
  return {};
}

}  // namespace heddle
