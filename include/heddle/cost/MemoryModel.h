// Closed-form memory figures: model states under mixed-precision Adam and ZeRO (arXiv 1910.02054)
// and transformer-layer activations (Korthikanti et al., arXiv 2205.05198). The simulator derives
// activations from the graph; these formulas are the published references it is checked against.
#pragma once

#include <cstdint>
#include <string_view>

#include "heddle/sharding/Recompute.h"
#include "heddle/support/Result.h"

namespace heddle::cost {

/// Bytes per device of weights, gradients and Adam state for `params` parameters (16 bytes each:
/// 2 + 2 + 12) under ZeRO stage `zero` over `dp` data-parallel devices: stage 0 `16P`, 1
/// `4P + 12P/N`, 2 `2P + 14P/N`, 3 `16P/N`. Precondition: 0 <= zero <= 3, dp >= 1.
double model_state_bytes(double params, int64_t zero, int64_t dp);

/// Korthikanti's activation bytes of one transformer layer for a micro-batch of `b` sequences of
/// length `s`, hidden `h`, `a` heads, tensor-parallel `t`, with or without sequence parallelism:
/// `sbh (34 + 5as/h)` (t = 1), `sbh (10 + 24/t + 5as/(ht))`, with sp `sbh (34/t + 5as/(ht))`;
/// full recomputation keeps `2sbh` (divided by t with sp); selective drops the `5as/h` term.
/// Precondition: all sizes >= 1.
double layer_activation_bytes(double s, double b, double h, double a, int64_t t, bool sp,
                              Recompute r);

}  // namespace heddle::cost
