// Fused elementwise chains: the calls of one lowered kKernel instruction run as one loop over
// memory, without tensors for the values that only flow inside the chain.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle::kernels {

/// One call of a chain: op `op` of the graph over index box `box`.
struct ChainCall {
  OpId op = -1;
  Box box;
};

/// The values a chain computes that live on after it, with their tiles.
using ChainResults = std::vector<std::pair<ValueId, Tensor>>;

/// Runs `calls` in order, as kernels::run would one by one. Runs of consecutive elementwise
/// calls over the same box (unit windows, no reduce dims or padding) are evaluated together, a
/// block of a row at a time through every op, so a value in `temporaries` that only flows from
/// one of them to the next never gets a tensor; other calls run through kernels::run. `input(v)`
/// gives the tile of a value the chain reads but does not compute (precondition: non-null).
/// Returns every computed value not in `temporaries` (tiles of its result projection's image of
/// the call's box), or the first Diagnostic of a kernel.
Result<ChainResults> run_chain(const Graph& g, const std::vector<ChainCall>& calls,
                               const std::vector<ValueId>& temporaries,
                               const std::function<const Tensor*(ValueId)>& input,
                               const KernelOptions& options = {});

/// One call of a chain bound to its operand tiles (in op.inputs order) and result tiles.
struct BoundCall {
  const Op* op = nullptr;
  Box box;
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  /// As KernelOptions::unchanged_inputs, for this call (run_chain_into ignores the options').
  uint32_t unchanged_inputs = 0;
};

/// run_chain on tiles the caller provides (an executor's planned buffers): each call's results
/// go to its `outs`, except a value in `temporaries` that only flows inside a fused run of calls,
/// which is never written. Allocates no tiles. Returns the first Diagnostic of a kernel.
Status run_chain_into(const std::vector<BoundCall>& calls, const std::vector<ValueId>& temporaries,
                      const KernelOptions& options = {});

/// True when run_chain evaluates op `op` inside a fused loop (given a compatible neighbour).
bool chain_fusable(const Op& op, const KernelOptions& options = {});

/// True when the fast kernel of a lone call of `op` (run(), not the reference loops) may write its
/// result over the tile of input `input`, when that tile has the result's region and dtype: `op`
/// is chain_fusable, unary, binary or a unary op's elementwise_grad, and its result and every
/// operand that reads input `input`'s value take the index point's own coordinates. Each element
/// is then read only by the point that writes it, before it writes it. An executor that frees the
/// input there may give the result the input's memory (in place).
bool writes_in_place(const Op& op, size_t input);

}  // namespace heddle::kernels
