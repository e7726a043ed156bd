// Executing device programs: one device's program against a Communicator, and all devices of a
// mesh as threads of this process (the default backend). These one-shot functions build a
// DeviceExecutor / ThreadedRunner per call; code that runs many steps keeps a ThreadedRunner.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "heddle/ops/Tensor.h"
#include "heddle/runtime/Communicator.h"
#include "heddle/runtime/InstrProfile.h"
#include "heddle/runtime/Program.h"
#include "heddle/runtime/ProgramTemplate.h"

namespace heddle {

/// Whole tensors by value id: the graph inputs and parameters a run starts from, or the outputs it
/// ends with.
using TensorMap = std::map<ValueId, Tensor>;

/// What the executor reports to ExecOptions::on_ring_event.
struct RingEvent {
  enum class Kind : uint8_t {
    kPosted,       ///< a ring step's exchange was started (overlapped, or about to block)
    kWaited,       ///< a ring step's exchange has finished, as the device waited for it
    kKernelBegin,  ///< a ring block kernel starts
    kKernelEnd,    ///< a ring block kernel has finished
  };
  Kind kind = Kind::kPosted;
  const Instr* instr = nullptr;  ///< the step or block kernel, in the device's program
};

/// Options of a run.
struct ExecOptions {
  /// When > 0, the 1-based optimizer step AdamW's bias correction uses (overriding the `step`
  /// attribute), so one lowered training step serves every step of a run. Default 0.
  int64_t optimizer_step = 0;
  /// Intra-op threads per device (KernelOptions::threads, and OpenBLAS's thread count while the
  /// devices of a threaded run compute). 0 (default): the host's cores divided by the devices
  /// sharing them, at least 1 (see threads_per_device()); run_device, which cannot know how many
  /// devices share the host, then uses 1.
  int threads = 0;
  /// The caller's promise that every feed holds the same bytes at the same address as in this
  /// executor's previous run (a forward-only step loop): kernels may then reuse what they derived
  /// from loaded values (KernelOptions::unchanged_inputs). Default false.
  bool feeds_unchanged = false;
  /// The caller will run this executor on the same feeds on every call of this run (a
  /// forward-only step loop), this first call included (KernelOptions::feeds_repeat). Default
  /// false.
  bool feeds_repeat = false;
  /// Ring attention (cp_comm=ring): post each ring step's exchange before the kernel of the block
  /// the device already holds and wait for it after, so the transfer overlaps the block's compute
  /// (on a thread of the executor that makes the exchange's communicator calls). False: each step
  /// is a blocking exchange before that kernel. The results are the same. Default true.
  bool overlap_ring = true;
  /// When set, called on the running thread around each ring block kernel and when a ring step is
  /// posted and waited for (RingEvent): the order tests and traces see. Default unset.
  std::function<void(const RingEvent&)> on_ring_event = nullptr;
  /// When set, each device adds the wall time of every instruction of this run to
  /// (*instr_times)[its rank] (InstrProfile.h), which must exist. Devices write only their own
  /// entry. Default unset: nothing is timed.
  std::vector<InstrTimes>* instr_times = nullptr;
};

/// Runs `program` as device comm.rank(). `feeds` holds every graph input and parameter the
/// program loads (only the device's tiles are read). Returns the device's tiles of the graph
/// outputs. A kernel error marks the run failed but the program keeps taking part in collectives,
/// so peers never wait forever. Precondition: the program was lowered from `g`.
Result<TensorMap> run_device(const Graph& g, const DeviceProgram& program, Communicator& comm,
                             const TensorMap& feeds, const ExecOptions& options = {});

/// Runs every device's program on its own thread with shared-memory collectives and returns the
/// graph outputs (whole tensors, from device 0's tiles, which cover them when lowering replicated
/// the outputs). Repeated runs are bit-identical. OpenBLAS runs each device's sgemm on the
/// device's share of the cores (see ExecOptions::threads; the thread count is restored after).
/// Precondition: programs lowered from `g`, one per device, in device order.
Result<TensorMap> run_threaded(const Graph& g, const std::vector<DeviceProgram>& programs,
                               const TensorMap& feeds, const ExecOptions& options = {});

/// The same for a shared template: each device's program is instantiated and compiled on its own
/// thread. Precondition: `programs` lowered from `g`.
Result<TensorMap> run_threaded(const Graph& g, const ProgramTemplate& programs,
                               const TensorMap& feeds, const ExecOptions& options = {});

}  // namespace heddle
