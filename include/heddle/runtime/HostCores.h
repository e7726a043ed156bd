// HostCores: how many cores this process may use, and how a run shares them among its devices, so
// that device threads and their intra-op threads never oversubscribe the host.
#pragma once

#include <cstdint>

namespace heddle {

/// The cores this process may run on: the size of its CPU affinity mask (sched_getaffinity, which
/// respects taskset and cgroup cpusets), else std::thread::hardware_concurrency(); at least 1.
int host_cores();

/// The intra-op threads each of `devices` device threads of this process may use: `requested`
/// when > 0, else max(1, host_cores() / devices). Precondition: devices >= 1.
int threads_per_device(int64_t devices, int requested = 0);

}  // namespace heddle
