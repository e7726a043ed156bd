// Helpers of the ops tests: random tensors, running one op whole or as random sub-boxes, and
// element iteration for the naive evaluators.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/Tensor.h"

namespace heddle::testing {

/// Calls f(p) for every coordinate of `shape`.
void for_all(const IVec& shape, const std::function<void(const IVec&)>& f);

/// A tensor of `t` filled uniformly in [lo, hi) (floats) or [0, int_hi) (integers).
Tensor random_tensor(const TensorType& t, std::mt19937& rng, double lo = -1.0, double hi = 1.0,
                     int64_t int_hi = 2);

/// Runs op `id` of `g` over its whole index space on full tensors, with kernel `options`.
std::vector<Tensor> run_whole(const Graph& g, OpId id, const std::vector<Tensor>& inputs,
                              const kernels::KernelOptions& options = {});

/// Runs op `id` as a random partition of its index space into sub-boxes (reduce dims split too),
/// each on cropped input tiles into its own output tile, then merges: partials of reduce dims
/// with the monoid, parallel tiles by copying. With `accumulate`, runs the pieces directly into
/// shared outputs with KernelOptions::accumulate instead.
std::vector<Tensor> run_pieces(const Graph& g, OpId id, const std::vector<Tensor>& inputs,
                               std::mt19937& rng, bool accumulate);

/// `box` cut along each dim (with probability 1/2) at one or two random places: the pieces tile
/// the box, in row-major order of their cuts.
std::vector<Box> random_grid(const Box& box, std::mt19937& rng);

/// Runs `op` over `piece` of its index space on input tiles `ins` and merges the result into
/// `out` (the whole result): in place when `options.accumulate` and the op reduces, else into a
/// tile of its own (filled with 1e6 first, so what the kernel leaves unwritten shows) that is
/// summed into `out` (an op that reduces) or copied there.
void run_piece_into(const Op& op, const Box& piece, const std::vector<const Tensor*>& ins,
                    Tensor& out, const kernels::KernelOptions& options);

/// Every op of `g` in order over its whole box with the reference loops (options.reference and
/// direct_conv): `values` indexed by ValueId hold the parameters; returned with every result.
std::vector<Tensor> run_reference(const Graph& g, std::vector<Tensor> values);

/// Max |a - b| / (1 + |b|) over elements; infinity on shape mismatch. Equal infinities count 0.
double max_rel_diff(const Tensor& a, const Tensor& b);

/// Checks the gradient of scalar `loss` with respect to every parameter of `g` (some elements
/// of each) against central finite differences of the interpreter's loss, parameters drawn in
/// [lo, hi); the graph and its backward graph must verify.
void check_gradients(const Graph& g, ValueId loss, double lo, double hi, std::mt19937& rng);

/// The training step (forward, backward, AdamW) of zoo model `name` with 2 layers and 4 heads at
/// the given small sizes.
Graph small_train_graph(const char* name, int64_t seq, int64_t hidden, int64_t batch,
                        int64_t vocab);

/// Calls f(ops, temporaries) for every chain of `g` as the lowering forms them (each next op
/// elementwise, reading the previous op's single result, its only use), in op order; the
/// temporaries are the values passed along the chain.
void for_each_chain(
    const Graph& g,
    const std::function<void(const std::vector<OpId>&, const std::vector<ValueId>&)>& f);

/// A uniform integer in [lo, hi].
int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi);

/// Max |a - b| / (1 + |b|) over two tiles of one region (equal infinities and NaNs count 0;
/// infinity when the regions differ).
double tile_diff(const Tensor& a, const Tensor& b);

/// A float tile over `box` of NaNs: what stands for a value between fused calls, which a fused
/// kernel never writes.
Tensor nan_tile(const Box& box);

/// True when every element of float tile `t` is NaN.
bool all_nan(const Tensor& t);

/// A random non-empty sub-box of `b`.
Box random_sub_box(const Box& b, std::mt19937& rng);

/// A random region of `whole` that contains `inner` (inner itself half of the time).
Box random_cover(const Box& inner, const Box& whole, std::mt19937& rng);

/// The graph of einsum `spec` ("ab,bc->ac") on params a and b whose dims have the extents `ext`
/// (by letter), its result an output; returns a.
ValueId einsum_of(Ops& ops, const std::string& spec, const std::map<char, int64_t>& ext);

}  // namespace heddle::testing
