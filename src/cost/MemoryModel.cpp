#include "heddle/cost/MemoryModel.h"

#include <fmt/format.h>

#include <algorithm>

#include "heddle/support/Assert.h"

namespace heddle::cost {

double model_state_bytes(double params, int64_t zero, int64_t dp, double grad_bytes,
                         double weight_bytes) {
  HEDDLE_ASSERT(zero >= 0 && zero <= 3 && dp >= 1) << "zero " << zero << " dp " << dp;
  const double p = params, n = static_cast<double>(dp), w = weight_bytes, g = grad_bytes;
  const double o = w >= 4 ? 8 : 12;  // Adam's moments, and fp32 master weights for 16-bit ones
  switch (zero) {
    case 0:
      return (w + g + o) * p;
    case 1:
      return (w + g) * p + o * p / n;
    case 2:
      return w * p + (g + o) * p / n;
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
                             double element_bytes, double grad_bytes) {
  HEDDLE_ASSERT(zero >= 0 && zero <= 3 && dp >= 1) << "zero " << zero << " dp " << dp;
  if (zero < 2 || dp == 1) return 0;
  if (zero == 2) return 2 * std::min(gradient_bucket_params(dp), params) * grad_bytes;
  const double unit = std::min(unit_params, params);
  const double gradient = element_bytes + (grad_bytes != element_bytes ? grad_bytes : 0);
  return unit * (2 * element_bytes + gradient);
}

double allocator_allowance_bytes(const DeviceProfile& dev, double dynamic_bytes) {
  return dev.runtime_bytes + dev.fragmentation * std::max(dynamic_bytes, 0.0);
}

}  // namespace heddle::cost
