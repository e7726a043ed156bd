// What a run needs of the host's memory, worked out from the plan before anything is
// allocated: each device program's peak of live tiles, the whole feeds, and the single-device
// reference with --check; and what the host has (its physical memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/runtime/PipelineProgram.h"
#include "heddle/runtime/Program.h"

namespace heddle {

/// Bytes a tensor of `numel` elements of `dtype` takes in memory (fp32 or int64 storage).
int64_t tensor_storage_bytes(DType dtype, int64_t numel);

/// The most bytes of tiles `program` holds at once, replaying its instructions as the reference
/// executor keeps them: loaded and collective-produced tiles until freed, halo tiles until the
/// next kernel, a kernel call's outputs (and a fused chain's temporaries until the instruction
/// ends). Kernel scratch (im2col, BLAS packing) and the feeds the loads read are not counted.
/// Precondition: `program` was lowered from `g`.
int64_t program_peak_bytes(const Graph& g, const DeviceProgram& program);

/// program_peak_bytes() of every program, in device order.
std::vector<int64_t> peak_bytes_per_device(const Graph& g,
                                           const std::vector<DeviceProgram>& programs);

/// Per device, in device order: the bytes of the parameters and inputs its program reads, each
/// value counted once over the smallest box covering its loads (load_hulls()): the part of the
/// feeds the device holds beside program_peak_bytes() (under MPI, what its rank materializes).
std::vector<int64_t> feed_bytes_per_device(const Graph& g,
                                           const std::vector<DeviceProgram>& programs);

/// Per global device of a pipeline: the largest program_peak_bytes() over the blocks (forward,
/// backward, weight-gradient, optimizer) its stage runs. An estimate from below: values stashed
/// between blocks of different micro-batches are not counted.
std::vector<int64_t> pipeline_peak_bytes(const PipelineProgram& P);

/// What a threaded run holds on the host at its peak.
struct HostMemoryNeed {
  int64_t devices = 0;    ///< the sum of every device's peak (all devices are threads here)
  int64_t feeds = 0;      ///< the whole parameters and inputs the run starts from
  int64_t reference = 0;  ///< the single-device reference with --check (0 without)
  int64_t total() const { return devices + feeds + reference; }
  /// `1.2 GiB (devices 1.0 GiB + feeds 100 MiB + reference 100 MiB)`.
  std::string to_string() const;
};

/// Bytes of every parameter and input of `g` (whole): HostMemoryNeed::feeds.
int64_t model_feed_bytes(const Graph& g);

/// Bytes the single-device reference of `g` holds (a run's check): parameters and activations.
int64_t reference_bytes(const Graph& g);

/// The host's physical memory in bytes (sysconf), or 0 when it cannot be read.
int64_t physical_memory_bytes();

/// Nothing when `need` fits in `available` bytes (0: unknown, always fits); else a diagnostic
/// naming both figures and what to change. `from_option`: `available` is the user's
/// `--host-memory BYTES`, not the physical memory (the message says which). Default false.
Status check_host_memory(const HostMemoryNeed& need, int64_t available, bool from_option = false);

}  // namespace heddle
