#include "Offload.h"

#include <algorithm>

#include "heddle/support/Assert.h"

namespace heddle::cost {

bool offloads_weights(Offload o) {
  return o == Offload::kOptimizerParams || o == Offload::kOptimizerParamsNvme;
}

OffloadedStates offloaded_states(Offload o, double params, double working, int64_t zero, int64_t dp,
                                 double e, double extra) {
  const double n = static_cast<double>(dp);
  const double owned = zero >= 1 ? params / n : params;
  const double weights = zero >= 3 ? params / n : params;
  OffloadedStates s;
  switch (o) {
    case Offload::kOptimizer:
      s.device = e * (weights + (zero >= 2 ? params / n : params)) + extra;
      s.host = 16 * owned;
      break;
    case Offload::kOptimizerParams:
      s.device = 2 * 2 * e * std::min(working, params) + extra;
      s.host = 16 * owned + e * weights;
      break;
    case Offload::kOptimizerParamsNvme:
      s.device = 2 * 2 * e * std::min(working, params) + extra;
      s.host = 4 * owned + 2 * e * std::min(working, params);
      s.nvme = 12 * owned + e * weights;
      break;
    default:
      HEDDLE_UNREACHABLE() << "offloaded_states of offload=" << to_string(o);
  }
  return s;
}

HostStep host_optimizer_step(const Techniques& t, const Cluster& kc, double owned, double e,
                             double window) {
  HEDDLE_ASSERT(t.offload == Offload::kOptimizer || offloads_weights(t.offload))
      << to_string(t.offload);
  HostStep h;
  const double pcie = kc.host_bandwidth;
  const double dram = kc.host_memory_bandwidth > 0 ? kc.host_memory_bandwidth : pcie;
  h.opt = owned * 28 / dram;
  double up = owned * e / pcie;
  if (t.offload == Offload::kOptimizerParamsNvme) {
    const double io = owned * (12 / kc.nvme_read_bandwidth + 14 / kc.nvme_write_bandwidth);
    h.opt = t.overlap != Overlap::kNone ? std::max(h.opt, io) : h.opt + io;
    up = 0;  // the updated weights stay on NVMe
  }
  const double down = owned * e / pcie;
  const double down_exposed =
      t.overlap != Overlap::kNone ? std::max(down - std::max(window, 0.0), 0.0) : down;
  h.host = down_exposed + up;
  h.hidden_host = down - down_exposed;
  return h;
}

double weight_fetch_bandwidth(Offload o, const Cluster& kc) {
  if (o == Offload::kOptimizerParamsNvme)
    return std::min(kc.host_bandwidth, kc.nvme_read_bandwidth);
  return kc.host_bandwidth;
}

}  // namespace heddle::cost
