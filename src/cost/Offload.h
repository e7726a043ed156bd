// Offloaded training state as the simulator prices it (private to the simulator): where one
// device's model states live under `offload=` (device memory, host memory, NVMe), what the
// optimizer step on the host costs, and how fast offloaded weights come back for each layer.
#pragma once

#include <cstdint>

#include "heddle/cost/Cluster.h"
#include "heddle/cost/Techniques.h"

namespace heddle::cost {

/// Bytes of one device's model states in each tier.
struct OffloadedStates {
  double device = 0, host = 0, nvme = 0;
};

/// Where one device's states live with `params` local parameter elements replicated over `dp`
/// under ZeRO stage `zero` (`working` of them: what the device holds at a time when the weights
/// live elsewhere; `extra` bytes more on the device, the fp8 weight copy), `e` bytes per element:
/// - optimizer (ZeRO-Offload): bf16 weights and gradients on the device (sharded by ZeRO as
///   usual), the owned share's fp32 master weights, Adam moments and fp32 gradients on the host
///   (16 bytes per parameter);
/// - optimizer+params (ZeRO-Infinity to DRAM): also the bf16 weights on the host, the device
///   keeping its working set twice (the one computing and the one prefetched);
/// - optimizer+params:nvme (ZeRO-Infinity to NVMe): the fp32 master weights, moments and bf16
///   weights on NVMe (14 bytes per owned parameter), the host keeping the fp32 gradients (4) and
///   a staging buffer of twice the working set.
/// Precondition: `o` is one of these three.
OffloadedStates offloaded_states(Offload o, double params, double working, int64_t zero, int64_t dp,
                                 double e, double extra);

/// The optimizer step on the host for `owned` parameters on kind `kc`, `e` bytes per gradient.
struct HostStep {
  double opt = 0;          ///< the update: host DRAM (and NVMe) time
  double host = 0;         ///< PCIe transfers left exposed
  double hidden_host = 0;  ///< PCIe transfers hidden behind backward
};

/// DeepSpeed's CPU Adam: the owned gradients go down over PCIe (behind the last backward's
/// `window` seconds with overlap), the update streams 28 bytes per parameter through host DRAM
/// (fp32 weight, moments and gradient read, the first three written) and the updated bf16
/// weights come back up (from DRAM: one more PCIe transfer). With NVMe, each sub-group's 12
/// bytes of fp32 state are read from NVMe and 14 (state and bf16 weights) written back, sharing
/// the drives; ZeRO-Infinity overlaps that I/O with the update of the neighbouring sub-groups
/// (with `t.overlap`: the slower of the two; without: their sum); the weights stay on NVMe until
/// forward fetches them. Precondition: t.offload is optimizer, optimizer+params or its nvme form.
HostStep host_optimizer_step(const Techniques& t, const Cluster& kc, double owned, double e,
                             double window);

/// Bytes/s offloaded weights come back per layer: PCIe from host memory, or with NVMe the slower
/// of an NVMe read and PCIe.
double weight_fetch_bandwidth(Offload o, const Cluster& kc);

/// True when `o` keeps the weights off the device (fetched per layer).
bool offloads_weights(Offload o);

}  // namespace heddle::cost
