// Roofline compute time of one op on a device: FLOPs against the peak times a shape-dependent
// GEMM efficiency, bytes against the memory bandwidth, plus a kernel launch.
#pragma once

#include <string>

#include "heddle/cost/DeviceProfile.h"
#include "heddle/ir/Graph.h"

namespace heddle::cost {

/// What one op costs on one device for the index box it computes.
struct OpTime {
  double seconds = 0;     ///< max(flops / (peak * eff), bytes / (bw * mem_eff)) + launch
  double flops = 0;       ///< FLOPs of the local box
  double bytes = 0;       ///< bytes read and written by the local box, in the device's element size
  double efficiency = 0;  ///< the GEMM fraction used (0 for ops without a GEMM shape)
  double compute_s = 0;   ///< the FLOP side of the roofline
  bool gemm = false;      ///< costed as a GEMM
  bool measured = false;  ///< costed from the device's measured kernel rate (kernel_element_s)
  bool operator==(const OpTime&) const = default;
};

/// The time of op `id` computing `local` (a box of its index space) on `device`. Contractions
/// and two-input windowed ops are GEMM-shaped: index dims used by input 0 only form M (with dims
/// used by both inputs and the result, the batch), by input 1 only N, reduce dims (times input
/// 1's window) K; a contraction reading a parameter runs at `param_gemm_flops` when the device
/// sets it (fp8 linear layers). An op whose kernel_rate_key() (else kind name) the device lists in
/// kernel_element_s costs `launch + kernel_elements x rate` instead. Precondition: verified graph,
/// `local` within the op's index space.
OpTime op_time(const Graph& g, OpId id, const Box& local, const DeviceProfile& device);

/// The elements a kernel of `op` visits over `box`: its index points times the elements of its
/// largest input window (a softmax over windowed rows counts every element of its rows; a
/// convolution its multiply-adds). What DeviceProfile::kernel_element_s rates are per.
/// Precondition: `box` within the op's index space.
double kernel_elements(const Op& op, const Box& box);

/// The key of `op` in DeviceProfile::kernel_element_s: its kind name, with the function for
/// `elementwise_grad` (`elementwise_grad:gelu`: the derivative computed differs per function).
std::string kernel_rate_key(const Op& op);

/// Bytes/s the memory side of the roofline uses: GEMMs stream at memory_bandwidth x
/// memory_efficiency; other kernels at elementwise_bandwidth when the profile sets it.
double stream_rate(const DeviceProfile& device, bool gemm);

/// `t` with `bytes` memory traffic instead, and without the launch when `fused` (the op runs
/// inside its producer's kernel). Precondition: bytes >= 0.
OpTime with_bytes(const OpTime& t, double bytes, bool fused, const DeviceProfile& device);

/// True for ops a fusing runtime runs as the epilogue of their producer: elementwise, select and
/// layout ops and row-wise normalizations (softmax, layernorm).
bool fusable(OpKind kind);

}  // namespace heddle::cost
