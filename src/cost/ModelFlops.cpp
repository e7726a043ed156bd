#include "heddle/cost/ModelFlops.h"

#include "heddle/support/Assert.h"

namespace heddle::cost {

double gpt_model_flops(const zoo::GptConfig& c, int64_t batch, bool train, bool full_recompute) {
  HEDDLE_ASSERT(batch >= 1);
  double B = static_cast<double>(batch), s = static_cast<double>(c.seq);
  double l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  double V = static_cast<double>(c.vocab);
  // Per token and layer 24 h^2 + 4 s h FLOPs forward (multiply-adds count 2), run once forward,
  // three times in training and four with full recomputation; the logits (2 h V per token) run
  // once forward and three times in training (they are not recomputed).
  double layer_passes = !train ? 1 : (full_recompute ? 4 : 3), logit_passes = train ? 3 : 1;
  return layer_passes * 24 * B * s * l * h * h * (1 + s / (6 * h)) +
         logit_passes * 2 * B * s * h * V;
}

}  // namespace heddle::cost
