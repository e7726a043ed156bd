// Box-level reference kernels: compute any sub-box of an op's index space, so the same kernel
// computes a whole op or any shard of it. Contractions and convolutions (im2col) call OpenBLAS
// sgemm; the rest are fp32 loops.
#pragma once

#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle::kernels {

struct CausalOperand;  // heddle/ops/CausalOperand.h

/// How a kernel call combines with what its outputs already hold.
struct KernelOptions {
  /// false (default): outputs over the box's image are overwritten (ops with reduce dims first
  /// reset them to the monoid's identity). true: ops with reduce dims combine their partial
  /// result into the existing values with the monoid (sum, max, min), so splitting the reduce
  /// dims of a box into pieces and running them in turn gives the whole result. Ops without
  /// reduce dims always overwrite.
  bool accumulate = false;
  /// When > 0, overrides the `step` attribute of adamw (bias correction); default 0.
  int64_t optimizer_step = 0;
  /// Convolutions and pooling run the direct per-point loops instead of im2col + sgemm (the
  /// reference the fast kernels are tested and benchmarked against). Default false.
  bool direct_conv = false;
  /// Cores this call may use for its own loops and the libraries it calls (OpenBLAS, oneDNN).
  /// The executor sets it from the host's cores and the devices sharing them. Default 1.
  int threads = 1;
  /// With threads > 1: the least work (elements, or multiply-adds for sgemm / 64) worth a piece
  /// on another thread; smaller calls run whole on the caller's thread. Tests set 1 to split
  /// tiny calls. Default 32768.
  int64_t grain = 32768;
  /// Runs the generic reference loops (projection walker, double-precision row math) instead of
  /// the fast kernels chosen for plain row-major operands; the tests compare the two. Default
  /// false.
  bool reference = false;
  /// Bit i set: input i holds the same bytes at the same address as the last time this caller
  /// ran this op, so a kernel may reuse what it derived from it then (the oneDNN convolution
  /// keeps its weights reordered into the blocked layout). A call with the bit clear derives
  /// afresh. Default 0 (nothing assumed).
  uint32_t unchanged_inputs = 0;
  /// The caller runs this op again and again on the same feeds (a forward-only step loop), from
  /// its first call: a kernel keeps to the path that derives once from loaded values and reuses
  /// it (unchanged_inputs, from the second call) rather than one that is cheaper once and would
  /// hand over to it mid-run. Results are the same either way. Default false.
  bool feeds_repeat = false;
  /// The operand of this einsum or softmax that a causal mask hides in part (causal_operand(),
  /// derived from the graph by the caller): the contraction then skips the blocks of the product
  /// that are masked out (results written there are 0 where skipped, inputs there must be
  /// zeros); the softmax reads each row's visible prefix only (its input must be -inf past it).
  /// Only valid for the op it was derived for. Default nullptr: everything is computed.
  const CausalOperand* causal = nullptr;
};

/// Computes the points of index box `box` of `op`: for each result, the elements of the
/// projection image of `box`. Tensors may be tiles (see Tensor::origin); all addressing is global.
/// Preconditions: box lies inside op.space; inputs[i] holds the image of `box` under input i's
/// projection (for `padded` inputs: that image intersected with the tensor; elements outside the
/// tile read as zero); outputs[i] holds the image under result i's projection. Returns a
/// Diagnostic for data errors (e.g. a label out of range) and for op forms no kernel implements.
Status run(const Op& op, const Box& box, const std::vector<const Tensor*>& inputs,
           const std::vector<Tensor*>& outputs, const KernelOptions& options = {});

/// Combines `src` into `dst` elementwise over the intersection of their regions with monoid `m`
/// (for merging partial results computed into separate buffers).
void combine(Monoid m, Tensor& dst, const Tensor& src);

/// The identity of monoid `m`: 0, -inf or +inf.
float monoid_identity(Monoid m);

/// True on hosts where the contraction kernels' one-thread sgemm is oneDNN's (AVX-512 hosts:
/// faster there), false where it is OpenBLAS's (AVX2-only hosts, where oneDNN's AVX2 sgemm ran the
/// GPT step's weight gradients at half OpenBLAS's speed; docs/benchmarks.md). Fixed per process,
/// so a run's results repeat bitwise. On false hosts OpenBLAS must be set to one thread while a
/// device's own threads call it (runtime/BlasThreads.h: device_blas_threads).
bool onednn_sgemm_first();

/// How many kernel calls the oneDNN convolution and pooling path has served in this process (the
/// rest fell back to im2col + sgemm or the direct loops; the depthwise weight gradients it hands
/// to its own loops, where oneDNN has only its gemm path, and the pooling it hands to its own
/// loops, where oneDNN has only plain NCHW loops (AVX2-only hosts), count as served): lets tests
/// and benchmarks see that the fast path ran.
int64_t onednn_calls();

/// How many kernel calls the convolutions as matrix products (forward, input and weight
/// gradients, src/ops/KernelConv1x1.cpp: 1x1 ones per image on the NCHW tiles, and batch-packed
/// ones on small planes and strides) have served in this process.
int64_t conv1x1_calls();

/// How many fused passes over the gradients of one layernorm or rmsnorm (dx, the scale's and the
/// shift's in one read of each row; src/ops/KernelRows.cpp) this process has run.
int64_t norm_grad_passes();

/// How many calls the per-channel affine loops (a mul or add of a value per channel on NCHW
/// planes, and the mul's gradient; src/ops/KernelChannelAffine.cpp) have served in this process.
int64_t channel_affine_calls();

/// How many calls the per-channel sums over NCHW images and planes (reduce_sum, and the gradient
/// of a per-channel factor of a mul; src/ops/KernelChannelAffine.cpp) have served in this process.
int64_t channel_reduce_calls();

}  // namespace heddle::kernels
