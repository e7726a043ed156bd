// Data-parallel gradient synchronisation as the simulator prices it (private to the simulator):
// the collectives of one step's gradients and weights under ZeRO, and what of bucketed
// communication stays exposed behind compute.
#pragma once

#include <cstdint>

#include "heddle/cost/Cluster.h"

namespace heddle::cost {

/// One stage's gradient synchronisation per step.
struct GradientSync {
  double reduce_s = 0;  ///< the gradients' all-reduce (ZeRO 0) or reduce-scatter (ZeRO >= 1)
  double gather_s = 0;  ///< the updated weights' all-gather(s) (ZeRO >= 1; twice under ZeRO-3)
  double bytes = 0;     ///< bytes each device moves (BytesMovedCost), 0 for a group of one
};

/// Without ZeRO one all-reduce of `grad_bytes`; with ZeRO 1 and 2 their reduce-scatter and the
/// all-gather of `weight_bytes`; with ZeRO-3 a second all-gather (forward and backward each gather
/// the weights); over `group` devices on `link`.
GradientSync gradient_sync(int64_t zero, int64_t group, double grad_bytes, double weight_bytes,
                           const LinkClass& link);

/// What of `seconds` of bucketed communication for `params` parameters stays exposed when it runs
/// behind `window` seconds of compute: the last bucket always (it is ready only when the compute
/// ends; Megatron-LM's --ddp-bucket-size default, 40M parameters), and whatever exceeds the window.
double exposed_behind(double seconds, double window, double params);

}  // namespace heddle::cost
