// The compiled form of a DeviceExecutor's program: its tiles (Buffer), kernel calls on them (Call)
// and instructions with their tiles resolved (Step). Private to the executor's source files.
#pragma once

#include <optional>
#include <vector>

#include "heddle/ops/CausalOperand.h"
#include "heddle/ops/Chain.h"
#include "heddle/runtime/DeviceExecutor.h"

namespace heddle {

// One tile the program makes: a view into the arena, or into a feed for zero-copy loads.
struct DeviceExecutor::Buffer {
  Tensor tensor;
  int64_t first = 0, last = 0;  // positions of its definition and of its last use
  int64_t bytes = 0;            // arena bytes (0 for feed views)
  int64_t feed_offset = -1;     // loads: the tile's element offset in the whole feed, or -1
  bool loaded = false;          // defined by a load (its bytes are the feed's)
  int view_of = -1;             // the earlier buffer whose bytes this one views (a reshape's
                                // result, an in-place result), or -1
  bool viewed = false;          // some view_of names this buffer
  void* home = nullptr;         // its arena memory (bind_outputs may point the tile elsewhere)
};

// One kernel call on precomputed tiles.
struct DeviceExecutor::Call {
  const Op* op = nullptr;
  Box box;
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  std::vector<int> in_buffers, out_buffers;  // resolved to the pointers after compiling
  uint32_t loaded_inputs = 0;                // bit i: input i is a loaded buffer
  bool accumulate = false;                   // a ring block combining into its results
  // An einsum's operand that a causal mask hides in part (KernelOptions::causal), if any.
  std::optional<kernels::CausalOperand> causal;
};

// One instruction with its tiles resolved (frees have none and are dropped).
struct DeviceExecutor::Step {
  Instr::Kind kind = Instr::Kind::kFree;
  const Instr* instr = nullptr;
  ValueId value = -1;
  int in = -1, out = -1;     // buffers: fetch input and result; load result
  int whole = -1, own = -1;  // ring steps: the gathered tile, and (step 1) the device's block
  bool local = false;        // a slice copied from the device's own tile `in` (no peer)
  bool post = false;         // a ring step started before the next step, a block kernel, ...
  const Instr* waits_for = nullptr;  // ... which waits for it when done (Compiler::overlap)
  // Collectives: the batch run back to back (run_order), with each one's input and result buffer.
  std::vector<const Instr*> collectives;
  std::vector<int> coll_in, coll_out;
  std::vector<CollectiveCall> batch;  // the same as Communicator::collectives takes them
  std::vector<Call> calls;
  std::vector<kernels::BoundCall> chain;  // the calls again, as ops/Chain.h takes them (> 1 call)
};

}  // namespace heddle
