// DeviceExecutor: one device's program compiled once for many steps. Every tile the program makes
// (loads, collective and halo results, kernel results, fused-chain temporaries) gets a static
// place in one arena per device, planned from the tiles' lifetimes, so a step after the first
// allocates nothing in the executor.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/support/HugePages.h"

namespace heddle {

struct ArenaLayout;  // heddle/runtime/ArenaPlan.h

/// One device's program, compiled: tiles are views into a per-device arena whose layout
/// (plan_arena over the tiles' lifetimes, from definition to last use or free) is fixed at
/// construction. Loads of a tile that is contiguous in the whole fed tensor view the feed itself
/// (no copy); other loads copy into the arena. Kernels write their whole output tiles (ops that
/// reduce reset them to the monoid's identity first), so reused memory is never re-zeroed.
/// Not thread-safe: one run at a time.
class DeviceExecutor {
 public:
  /// Compiles `program` (lowered from `g`, which must outlive this object). With
  /// `hold_collective_inputs`, the tile a collective or fetch sends stays unchanged until the
  /// device's next collective (the last one's until the end of the run), as a one-barrier
  /// ThreadedWorld needs; default false. With `batch_collectives`, collectives the program issues
  /// close together (nothing between them touches their values: a data-parallel step's gradient
  /// all-reduces, each followed by its optimizer update) move up to run back to back and go to
  /// the communicator as one Communicator::collectives() batch; peers must batch alike
  /// (collective_batches()); default false. With `in_place` (default true), the result of a lone
  /// elementwise call whose input tile nothing reads afterwards, of the same region and dtype,
  /// takes that tile's memory (kernels::writes_in_place says which inputs a kernel may overwrite):
  /// a gradient sum or an activation's gradient writes over the tile it reads.
  DeviceExecutor(const Graph& g, DeviceProgram program, bool hold_collective_inputs = false,
                 bool batch_collectives = false, bool in_place = true);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  /// Runs the program once as device comm.rank(), with `threads` intra-op threads per kernel call
  /// (KernelOptions::threads). `feeds` holds every graph input and parameter the program loads
  /// (whole tensors) and must stay unchanged until the run returns. A kernel error marks the run
  /// failed (and calls the on_error callback once) but the program keeps taking part in
  /// collectives, so peers never wait forever. Returns the first error. An exception of a step
  /// (a failed assert under throw_on_assert) fails the run the same way and is rethrown once the
  /// program has finished, on the calling thread.
  Status run(Communicator& comm, const TensorMap& feeds, const ExecOptions& options, int threads);

  /// Called once per failing run, from the running thread, when the device first fails.
  void set_on_error(std::function<void()> f) { on_error_ = std::move(f); }

  /// The device's tiles of the graph outputs after the last run, in g.outputs() order (outputs the
  /// device does not hold are absent): views valid until the next run.
  const std::vector<std::pair<ValueId, const Tensor*>>& outputs() const { return outputs_; }

  /// The graph outputs whose whole tiles only the program's trailing all-gathers assemble (after
  /// every other collective and kernel: a tensor-parallel training step's updated parameters and
  /// optimizer state), with the device's own tile each gathers. Ascending by value.
  const std::vector<std::pair<ValueId, const Tensor*>>& gathered_outputs() const {
    return gathered_;
  }
  /// Which of those trailing all-gathers the next runs skip: `skip[k]` for gathered_outputs()[k]
  /// (empty, the default: none). outputs() then holds the device's own tile of each skipped value
  /// instead of the whole: for callers that need only their own tiles between steps (an MPI rank
  /// feeding its updated tiles back). Every device of a run must skip alike: the all-gathers are
  /// collectives.
  void skip_gathers(const std::vector<char>& skip);

  /// Copies outputs() into `out`: an entry of the same dtype and region is overwritten in place
  /// (no allocation), others are replaced by an owning copy. A tile bound to its entry
  /// (bind_outputs) is already there and is not copied. With `only` (one flag per outputs()
  /// entry; empty, the default: every output), only the flagged outputs are copied.
  void copy_outputs(TensorMap& out, const std::vector<char>& only = {}) const;

  /// Until the next call, the kernels computing an output write it straight into the entry of
  /// `out` of the same dtype and region (an owning tensor), so copy_outputs has nothing to copy:
  /// each output tile that is a buffer of its own (not a loaded feed, not one a reshape views, not
  /// shared with another output) is bound to that entry's memory; the others, and outputs `out`
  /// has no such entry for, are computed in the arena. With `only` (one flag per outputs()
  /// entry; empty, the default: every output), only the flagged outputs are bound. Precondition:
  /// no tensor of `out` is read as a feed by the next run.
  void bind_outputs(TensorMap& out, const std::vector<char>& only = {});

  /// Which kernel instructions the next runs skip: program().instrs[i] when `(*skip)[i]` is set
  /// (null, the default: none); `skip` must live as long as it is in use. Meant for output-only
  /// kernels (output_only_kernels) whose outputs another device of a shared-memory runner
  /// computes: outputs() then holds stale tiles of them.
  void skip_kernels(const std::vector<char>* skip) { skip_ = skip; }

  /// The arena size: the most bytes of tiles this device holds at once (its planned peak), not
  /// counting loads that view the feeds and the kernels' own scratch.
  int64_t peak_bytes() const { return arena_bytes_; }
  /// Every meeting with peers in run order: the number of collectives of each batch (1 per
  /// collective without batching), 0 for a halo fetch. Devices that meet at shared-memory barriers
  /// must meet alike.
  const std::vector<int64_t>& collective_batches() const { return batch_sizes_; }
  /// The program this executor runs.
  const DeviceProgram& program() const { return program_; }

 private:
  struct Buffer;
  struct Call;
  struct Step;
  class Compiler;
  class Poster;

  // The arena layout of `buffers` (DeviceExecutorInPlace.cpp). With `in_place`, the result of a
  // lone kernel call whose input tile nothing reads after it, and which kernels::writes_in_place
  // lets it overwrite, becomes a view of that tile (no bytes of its own), so the call writes over
  // the input it reads; kept only where the arena comes out no larger than without it.
  static ArenaLayout plan_buffers(std::vector<Buffer>& buffers, const std::vector<Step>& steps,
                                  bool in_place);
  // A viewed buffer lives as long as its views.
  static void carry_view_lifetimes(std::vector<Buffer>& buffers);
  void fail(Diagnostic d);
  void load(const Step& s, const TensorMap& feeds);
  // One step of the program: a load, a collective or fetch, a kernel instruction.
  void run_step(const Step& s, Communicator& comm, const TensorMap& feeds,
                const kernels::KernelOptions& ko);
  // Every kernel call of the executor goes through here: the calls of one kernel instruction (a
  // fused elementwise chain when more than one), in order, on their precomputed tiles.
  void run_kernels(const Step& s, const kernels::KernelOptions& ko);
  // A ring block kernel; one that a posted ring step overlaps waits for that step after it.
  void run_block(const Step& s, const kernels::KernelOptions& ko);
  // A ring step's exchange: the send-recv of its block and the copies into the gathered tile.
  Status exchange(const Step& s, Communicator& comm);

  const Graph& g_;
  DeviceProgram program_;
  bool hold_collective_inputs_;
  bool batch_collectives_;
  bool in_place_;
  std::vector<int64_t> batch_sizes_;
  std::vector<Buffer> buffers_;
  std::vector<Step> steps_;
  std::unique_ptr<Poster> poster_;  // runs posted ring steps (ExecOptions::overlap_ring)
  std::vector<std::pair<ValueId, const Tensor*>> outputs_;
  std::vector<int> output_buffers_;                          // the buffer of each of outputs_
  std::vector<std::pair<ValueId, const Tensor*>> gathered_;  // gathered_outputs()
  size_t trailing_gathers_ = 0;  // steps_ from here on are those all-gathers (steps_.size(): none)
  // skip_gathers: per trailing step, the calls still made (none: the step is skipped); empty
  // when nothing is skipped.
  std::vector<std::vector<CollectiveCall>> trailing_batches_;
  std::vector<char> bound_;                  // bind_outputs' scratch: per buffer, bound this run
  const std::vector<char>* skip_ = nullptr;  // skip_kernels: per program instruction, or null
  HugeBuffer<std::byte> arena_;  // every planned buffer, on huge pages where the host gives them
  int64_t arena_bytes_ = 0;
  std::vector<Tensor> fallback_;  // owning tiles for loads whose feed cannot be viewed
  Status error_;
  std::function<void()> on_error_;
  int64_t runs_ = 0;              // runs started
  bool feeds_unchanged_ = false;  // this run's feeds are the last run's (ExecOptions)
  bool chain_unchanged_ = false;  // feeds_unchanged_ as the chains' calls last saw it
  bool overlap_ring_ = true;      // this run's ExecOptions::overlap_ring
  const std::function<void(const RingEvent&)>* on_ring_event_ = nullptr;  // this run's, or null
};

/// True while the calling thread is inside a kernel call of a DeviceExecutor: lets allocation
/// tests tell the kernels' own scratch from what the executor allocates.
bool in_kernel_call();

}  // namespace heddle
