// Calibration of this machine: GEMM throughput over sizes and streaming bandwidth through heddle's
// own box kernels (OpenBLAS, one thread per device as the threaded executor runs), memcpy
// bandwidth, and all-reduce latency and bandwidth between threads through shared memory; written as
// the JSON cluster profile `--cluster cpu` reads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/cost/Cluster.h"

namespace heddle::cost {

/// Options of calibrate_cpu().
struct CalibrateOptions {
  std::vector<int64_t> gemm_sizes = {32, 64, 128, 256, 512};  ///< square GEMM sizes measured
  double min_seconds = 0.05;           ///< minimum timing per measurement; default 0.05 s
  int64_t threads = 0;                 ///< devices (threads); 0: hardware concurrency
  int64_t bandwidth_bytes = 64 << 20;  ///< buffer for the bandwidth test; default 64 MiB
  bool kernel_rates = true;  ///< measure per-op-kind kernel rates (a few seconds); default on
  /// KernelRateOptions::models: the calibration models whose kernels are timed; default all.
  std::vector<std::string> kernel_rate_models;
};

/// What was measured.
struct CpuCalibration {
  std::vector<std::pair<int64_t, double>> gemm;    ///< (size, FLOP/s)
  double memory_bandwidth = 0;                     ///< bytes/s, memcpy
  double kernel_bandwidth = 0;                     ///< bytes/s of heddle's elementwise kernel
  double launch_s = 0;                             ///< one kernel call on one element
  double vector_flops = 0;                         ///< GeLU elements per second (op_cost FLOPs)
  double allreduce_latency = 0;                    ///< alpha, seconds
  double allreduce_bandwidth = 0;                  ///< bus bandwidth, bytes/s
  std::map<std::string, double> kernel_element_s;  ///< measure_kernel_rates(), when asked for
  Cluster cluster;                                 ///< the fitted profile
};

/// A rough calibration in a fraction of the time (`heddle calibrate --quick`, for tests): fewer
/// GEMM sizes, shorter timings, kernel rates from gpt-tiny alone.
CalibrateOptions quick_calibrate_options();

/// What was measured, one figure per line (GEMM per size, bandwidths, kernel call, kernel rates,
/// all-reduce, the GEMM fit), as `heddle calibrate` prints it.
std::string to_string(const CpuCalibration& cal);

/// Measures this machine (about 25 s of CPU, most of it the kernel rates; without them about a
/// second). Precondition: none.
CpuCalibration calibrate_cpu(const CalibrateOptions& options = {});

/// The cluster as JSON text that cluster_from_json() reads back to an equal cluster (modulo
/// `source`).
std::string cluster_to_json(const Cluster& c);

}  // namespace heddle::cost
