#include "GradientSync.h"

#include <algorithm>

#include "heddle/cost/AlphaBetaCost.h"

namespace heddle::cost {

namespace {

// Megatron-LM's gradient bucket (--ddp-bucket-size default): 40M parameters.
constexpr double kBucketParams = 40e6;

}  // namespace

GradientSync gradient_sync(int64_t zero, int64_t group, double grad_bytes, double weight_bytes,
                           const LinkClass& link) {
  GradientSync g;
  BytesMovedCost moved;
  if (zero == 0) {
    g.reduce_s = collective_time(Collective::kAllReduce, group, grad_bytes, link);
    g.bytes = group > 1 ? moved.cost(Collective::kAllReduce, 0, group, grad_bytes) : 0;
    return g;
  }
  const double gathers = zero == 3 ? 2 : 1;
  g.reduce_s = collective_time(Collective::kReduceScatter, group, grad_bytes, link);
  g.gather_s = gathers * collective_time(Collective::kAllGather, group, weight_bytes, link);
  g.bytes = group > 1 ? moved.cost(Collective::kReduceScatter, 0, group, grad_bytes) +
                            gathers * moved.cost(Collective::kAllGather, 0, group, weight_bytes)
                      : 0;
  return g;
}

double exposed_behind(double seconds, double window, double params) {
  const double last = seconds * std::min(1.0, kBucketParams / std::max(params, 1.0));
  return std::max(last, seconds - window);
}

}  // namespace heddle::cost
