// DeviceExecutor's outputs after a run: the tiles it hands over (its own tile of an output whose
// trailing all-gather it skips), copied into the caller's tensors or computed straight in them.
#include <algorithm>

#include "DeviceExecutorSteps.h"
#include "heddle/runtime/DeviceExecutor.h"

namespace heddle {

void DeviceExecutor::skip_gathers(const std::vector<char>& skip) {
  HEDDLE_ASSERT(skip.empty() || skip.size() == gathered_.size())
      << skip.size() << " flags for " << gathered_.size() << " gathered outputs";
  trailing_batches_.clear();
  for (size_t k = 0; k < outputs_.size(); ++k)
    outputs_[k].second = &buffers_[output_buffers_[k]].tensor;
  if (std::find(skip.begin(), skip.end(), 1) == skip.end()) return;
  auto skipped = [&](ValueId v) -> const Tensor* {
    auto it = std::lower_bound(gathered_.begin(), gathered_.end(), v,
                               [](const auto& g, ValueId x) { return g.first < x; });
    bool kept = it == gathered_.end() || it->first != v || !skip[it - gathered_.begin()];
    return kept ? nullptr : it->second;
  };
  for (auto& [v, t] : outputs_)
    if (const Tensor* own = skipped(v)) t = own;
  for (size_t i = trailing_gathers_; i < steps_.size(); ++i) {
    std::vector<CollectiveCall>& b = trailing_batches_.emplace_back();
    for (size_t k = 0; k < steps_[i].batch.size(); ++k)
      if (!skipped(steps_[i].collectives[k]->value)) b.push_back(steps_[i].batch[k]);
  }
}

void DeviceExecutor::bind_outputs(TensorMap& out, const std::vector<char>& only) {
  // Allocates nothing. A buffer is bound at most once, to the entry of the first output it holds.
  std::fill(bound_.begin(), bound_.end(), 0);
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const int i = output_buffers_[k];
    Buffer& b = buffers_[i];
    if (b.home == nullptr || b.loaded || b.viewed || b.view_of >= 0) continue;
    void* to = b.home;
    auto it = out.find(outputs_[k].first);
    if (!bound_[i] && (only.empty() || only[k]) && it != out.end() && !it->second.is_view() &&
        it->second.dtype() == b.tensor.dtype() && it->second.shape() == b.tensor.shape() &&
        it->second.origin() == b.tensor.origin()) {
      to = it->second.is_int() ? static_cast<void*>(it->second.i64())
                               : static_cast<void*>(it->second.f32());
      bound_[i] = 1;
    }
    b.tensor.rebind(to);
  }
}

void DeviceExecutor::copy_outputs(TensorMap& out, const std::vector<char>& only) const {
  for (size_t k = 0; k < outputs_.size(); ++k) {
    if (!only.empty() && !only[k]) continue;
    const auto& [v, t] = outputs_[k];
    auto it = out.find(v);
    if (it != out.end() && !it->second.is_view() && it->second.dtype() == t->dtype() &&
        it->second.shape() == t->shape() && it->second.origin() == t->origin()) {
      it->second.copy_from(*t);
    } else {
      out.insert_or_assign(v, *t);
    }
  }
}

}  // namespace heddle
