// Kernel rates: seconds per element (kernel_elements()) of heddle's own kernels per op kind,
// measured on this machine (part of `heddle calibrate`), so that the CPU profile prices softmax,
// layernorm, masks, gradients and optimizer updates at what the kernels cost rather than by FLOPs.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace heddle::cost {

/// Options of measure_kernel_rates().
struct KernelRateOptions {
  int64_t threads = 1;  ///< threads running the same kernels at once (the device threads); >= 1
  int repeats = 2;      ///< passes over the calibration graphs; each op keeps its best; >= 1
  double launch_s = 0;  ///< fixed cost of one kernel call, taken off each op's time; >= 0
  /// Which calibration models to run (names below); empty (default): all of them.
  std::vector<std::string> models;
};

/// Per op kind, and per kernel_rate_key() where that is finer (`elementwise_grad:relu`), seconds
/// per kernel element (kernel_elements()): every op of the training steps
/// (forward with loss, backward, AdamW) of small zoo models at calibration sizes (mlp batch 128;
/// gpt-tiny and llama-tiny batch 4, hidden 128, seq 64; moe-tiny batch 4, hidden 64, seq 32;
/// vit-b16 batch 1, hidden 96, one layer) runs over its whole index space with its output tiles
/// allocated as the executor allocates them; time is thread CPU time, so other processes' load does
/// not count; a kind's rate is its ops' total time less `launch_s` each over their total elements.
/// `einsum` is left out (the calibrated GEMM curve prices it). Precondition: options in range.
std::map<std::string, double> measure_kernel_rates(const KernelRateOptions& options = {});

}  // namespace heddle::cost
