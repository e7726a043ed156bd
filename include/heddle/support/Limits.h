// The resource limits heddle enforces, in one place: how much of an input file it reads, how
// many devices, ranks, micro-batches and threads a request may ask for. Each bound is far above
// any real use and far below what would exhaust the machine; an input beyond one is a user error
// that names the bound and why it exists (docs/reliability.md has the table).
#pragma once

#include <cstdint>

namespace heddle::limits {

/// Text IR files (the parser holds the text and ~1.2 KB per op: a 10^6-op graph is 67 MB).
inline constexpr int64_t kMaxTextIrBytes = int64_t{128} << 20;
/// Cluster and placement JSON files.
inline constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;
/// ONNX models read whole (protobuf's own message limit is 2 GiB; larger weights go in external
/// data files, which are read per tensor).
inline constexpr int64_t kMaxOnnxBytes = int64_t{2} << 30;
/// `.npy` input files (read whole, then converted: about twice this in memory at once).
inline constexpr int64_t kMaxNpyBytes = int64_t{4} << 30;

/// Devices of a `run` on the threads backend: one OS thread each, with its own arena.
inline constexpr int64_t kMaxThreadDevices = 1024;
/// Ranks of a `run` on the MPI backend (one process per device; communicators per mesh axis set).
inline constexpr int64_t kMaxMpiRanks = 65536;
/// Devices of a cluster for `plan` and `simulate` (the simulator's cost grows with the device
/// count: about 0.8 s of CPU per simulation at 4,096 devices).
inline constexpr int64_t kMaxClusterDevices = int64_t{1} << 17;
/// `schedule`: devices, micro-batches, and the blocks they make (devices x micro-batches x blocks
/// per micro-batch), which the schedulers hold in memory several times over.
inline constexpr int64_t kMaxScheduleDevices = 4096;
inline constexpr int64_t kMaxMicroBatches = 65536;
inline constexpr int64_t kMaxScheduleBlocks = int64_t{1} << 22;

}  // namespace heddle::limits
