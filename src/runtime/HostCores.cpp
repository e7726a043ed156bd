#include "heddle/runtime/HostCores.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "heddle/support/Assert.h"

namespace heddle {

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int threads_per_device(int64_t devices, int requested) {
  HEDDLE_ASSERT(devices >= 1) << "threads for " << devices << " devices";
  if (requested > 0) return requested;
  return static_cast<int>(std::max<int64_t>(1, host_cores() / devices));
}

}  // namespace heddle
