// Intra-op parallelism of the own loops: a call's index box split along one dim into pieces that
// write disjoint parts of every result, run on the device's threads (support/ThreadPool.h). Each
// output element is computed by one piece, by the same arithmetic as without the split, so the
// results are bitwise those of one thread whatever the thread count.
#pragma once

#include <functional>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Kernel.h"
#include "heddle/support/Result.h"

namespace heddle::kdetail {

using kernels::KernelOptions;

/// Pieces of `box` for the calls of `ops` (one op, or a fused elementwise group over the same box)
/// on `o.threads` threads: slices along the outermost index dim (the longest when none is long
/// enough) that reduces in no op and that every result reads alone in one of its rows, with a unit
/// window there, so the slices' result images are disjoint and every reduction stays whole in one
/// piece. At most 4 pieces per thread, each of at least `o.grain` elements of work (the box's
/// points times the largest operand window). Empty when the call should run whole on one thread
/// (one thread, too little work, no such dim, or options.reference).
std::vector<Box> split_box(const std::vector<const Op*>& ops, const Box& box,
                           const KernelOptions& o);

/// Runs f(piece) for every piece on o.threads threads and returns the first failed piece's status
/// (in piece order), else ok.
Status run_pieces(const std::vector<Box>& pieces, const KernelOptions& o,
                  const std::function<Status(const Box&)>& f);

/// True for the kinds kernels::run may split with split_box (the elementwise, row, reduction,
/// layout and optimizer ops; not contractions, convolutions, pooling, concat, gating or fill,
/// which have their own kernels).
bool splittable_kind(OpKind k);

/// The point of `box` at row-major position `i` (0 <= i < box.volume()), into p.
void point_at(const Box& box, int64_t i, int64_t* p);

}  // namespace heddle::kdetail
