#include "heddle/cost/ModelFlops.h"

#include "heddle/support/Assert.h"

namespace heddle::cost {

double gpt_model_flops(const zoo::GptConfig& c, int64_t batch, bool train, bool full_recompute) {
  HEDDLE_ASSERT(batch >= 1);
  double B = static_cast<double>(batch), s = static_cast<double>(c.seq);
  double l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  double V = static_cast<double>(c.vocab);
  // Per token per layer: 24 h^2 + 4 s h forward (x2 multiply-add); the logits 2 h V per token.
  double passes = !train ? 1 : (full_recompute ? 4 : 3);
  return passes * 24 * B * s * l * h * h * (1 + s / (6 * h) + V / (passes * 4 * l * h) * 1.0);
}

}  // namespace heddle::cost
