// KernelPointwiseFast: the pointwise loops with the op kind a compile-time constant, for the hot
// unary and binary kinds and their elementwise gradients (run_pointwise calls them when not asked
// for the reference path). Each kind instantiates the whole pointwise loop, so they live in two
// files of their own (KernelPointwiseUnary.cpp, KernelPointwiseBinary.cpp), compiled in parallel.
#pragma once

#include "KernelUtil.h"

namespace heddle::kdetail {

/// The fast loops read neither the point p nor the offset j, so their rows merge over the
/// trailing dims every operand walks regularly (for_each_merged_row): NCHW maps of 2x2 to 16x16
/// are one row per plane instead of one per image row, and a per-channel gradient ([C, 1, 1]
/// summed over N, H, W) sums rows of H * W (in the same order, so the same result).
inline constexpr bool kMergeRows = true;

/// Unary kind `k` (or, with `grad`, its elementwise_grad dy * f'(x)) with the kind a constant, for
/// the zoo's hot unary kinds; false (nothing written) for the others.
bool unary_fast(OpKind k, const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                const std::vector<Tensor*>& outs, Store mode, double alpha, bool grad);

/// Binary kind `k` (+ - * / max min) in float with the kind a constant; false for the others.
bool binary_fast(OpKind k, const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                 const std::vector<Tensor*>& outs, Store mode);

/// elementwise_grad of add, sub and mul with respect to input `wrt`, reading only the inputs the
/// derivative needs (dy, and the other factor for mul); false for other kinds.
bool binary_grad_fast(OpKind f, int wrt, const Op& op, const Box& box,
                      const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs,
                      Store mode);

/// A per-channel sum over an NCHW operand's images and planes (reduce dims 0, 2 and 3 of a rank-4
/// box, dim 1 kept): reduce_sum, or elementwise_grad of mul summed into the per-channel factor's
/// gradient (dy times the other factor; batch norm's scale), added into the result `mode` kSum
/// keeps (KernelChannelAffine.cpp). Walks channel by channel with each image's plane one row, so
/// late DenseNet planes of 4 or 16 elements cost no per-row set-up; each row is summed as the
/// pointwise loop sums it (unit_row_as) and the rows in image order, so the result is bitwise the
/// pointwise loop's. False (nothing written) for other forms.
bool run_channel_reduce(const Op& op, const Box& box, const std::vector<const Tensor*>& ins,
                        const std::vector<Tensor*>& outs, Store mode);

}  // namespace heddle::kdetail
