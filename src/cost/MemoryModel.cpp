#include "heddle/cost/MemoryModel.h"

#include <fmt/format.h>

#include <algorithm>

#include "heddle/support/Assert.h"

namespace heddle::cost {

double model_state_bytes(double params, int64_t zero, int64_t dp) {
  HEDDLE_ASSERT(zero >= 0 && zero <= 3 && dp >= 1) << "zero " << zero << " dp " << dp;
  double p = params, n = static_cast<double>(dp);
  switch (zero) {
    case 0:
      return 16 * p;
    case 1:
      return 4 * p + 12 * p / n;
    case 2:
      return 2 * p + 14 * p / n;
    default:
      return 16 * p / n;
  }
}

double layer_activation_bytes(double s, double b, double h, double a, int64_t t, bool sp,
                              Recompute r) {
  HEDDLE_ASSERT(s >= 1 && b >= 1 && h >= 1 && a >= 1 && t >= 1);
  double td = static_cast<double>(t), sbh = s * b * h;
  if (r == Recompute::kFull) return sp ? 2 * sbh / td : 2 * sbh;
  double attn = r == Recompute::kSelective ? 0 : 5 * a * s / (h * td);
  if (sp) return sbh * (34 / td + attn);
  if (t == 1) return sbh * (34 + attn);
  return sbh * (10 + 24 / td + attn);
}

double gradient_bucket_params(int64_t dp) {
  HEDDLE_ASSERT(dp >= 1) << "dp " << dp;
  return std::max(40e6, 1e6 * static_cast<double>(dp));
}

double gradient_buffer_bytes(int64_t zero, int64_t dp, double params, double unit_params,
                             double element_bytes) {
  HEDDLE_ASSERT(zero >= 0 && zero <= 3 && dp >= 1) << "zero " << zero << " dp " << dp;
  if (zero < 2 || dp == 1) return 0;
  if (zero == 2) return 2 * std::min(gradient_bucket_params(dp), params) * element_bytes;
  return 3 * std::min(unit_params, params) * element_bytes;
}

double allocator_allowance_bytes(const DeviceProfile& dev, double dynamic_bytes) {
  return dev.runtime_bytes + dev.fragmentation * std::max(dynamic_bytes, 0.0);
}

}  // namespace heddle::cost
