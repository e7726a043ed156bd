// ThreadedRunner: every device of a mesh as a persistent thread of this process, each with its
// DeviceExecutor (static arena, compiled program), so repeated steps (training) create no threads
// and allocate no tiles. The engine under run_threaded() and `heddle run`.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/ThreadedCommunicator.h"

namespace heddle {

/// Runs the programs of all devices of a mesh, one step per run(), on persistent threads with
/// shared-memory collectives. Device 0 runs on the calling thread, the others on workers that
/// sleep (futex, no spinning) between steps. Each device gets threads_per_device() intra-op
/// threads (ExecOptions::threads overrides); OpenBLAS's process-wide thread count is set to the
/// same for the duration of a run and restored after. One run at a time; `g` must outlive the
/// runner. Once a first step has shown that a device's replica of an output equals device 0's
/// tile bit for bit, later steps split copying the outputs among the devices: each copies its
/// share from its own replica as soon as it finishes, instead of device 0 copying all of them
/// after every device has finished. The outputs of an output-only kernel (output_only_kernels:
/// a data-parallel step's optimizer update of one parameter, alike on every device) go to one
/// device as a group, which computes them straight into the caller's tensors; the other devices
/// skip that kernel. Each update is then computed once per step instead of once per device, and
/// copied not at all. An output no device holds whole (lowered without
/// LowerOptions::replicate_outputs: a ZeRO or tensor-parallel step's updated parameters and
/// optimizer state) is assembled from the devices' tiles, each distinct tile copied into the
/// caller's tensor by one device as soon as it finishes: shared memory does what the trailing
/// all-gathers would.
class ThreadedRunner {
 public:
  /// Compiles one program per device (device order). Precondition: lowered from `g`.
  ThreadedRunner(const Graph& g, const std::vector<DeviceProgram>& programs);
  /// The same from a shared template; each device's program is instantiated and compiled on its
  /// own thread.
  ThreadedRunner(const Graph& g, const ProgramTemplate& programs);
  ~ThreadedRunner();
  ThreadedRunner(const ThreadedRunner&) = delete;
  ThreadedRunner& operator=(const ThreadedRunner&) = delete;

  /// One step from `feeds` (every graph input and parameter, whole; unchanged until the call
  /// returns). Returns the graph outputs (whole tensors: device 0's tile where it holds one whole,
  /// else assembled from every device's tile). An output whose tiles do not cover it exactly
  /// (each element in one distinct tile) is a diagnostic. Repeated runs are bit-identical. An
  /// exception on a device's thread (a failed assert under throw_on_assert) is rethrown here, on
  /// the calling thread, once every device has finished the step; the runner stays usable.
  Result<TensorMap> run(const TensorMap& feeds, const ExecOptions& options = {});
  /// The same, writing the outputs into `outputs`: entries that already hold a tensor of the
  /// output's type are overwritten in place, so a steady-state loop allocates nothing. On one
  /// device the kernels compute such outputs in those entries directly, with no copy after the
  /// step (DeviceExecutor::bind_outputs). Precondition: no tensor of `outputs` is one of `feeds`.
  Status run_into(const TensorMap& feeds, TensorMap& outputs, const ExecOptions& options = {});

  /// Number of devices.
  int64_t num_devices() const { return static_cast<int64_t>(devices_.size()); }
  /// Each device's planned peak of tile memory in bytes (DeviceExecutor::peak_bytes), in device
  /// order: the `peak_bytes_per_device` of a run summary.
  std::vector<int64_t> peak_bytes_per_device() const;
  /// Device `d`'s executor. Precondition: 0 <= d < num_devices().
  const DeviceExecutor& device(int64_t d) const { return *devices_[static_cast<size_t>(d)]; }

 private:
  // True when every device batches its collectives alike (DeviceExecutor::collective_batches):
  // they meet at the same barriers. Devices are compiled with batching, and again without it
  // when they do not agree.
  bool batches_agree() const;
  void start_workers();
  void worker(int64_t d);
  void run_device_step(int64_t d);
  // Rethrows the first device's exception (device order) and forgets them all; none: nothing.
  void rethrow_first();
  // After a serial copy from device 0: which device copies each output in later steps.
  void plan_output_copies();
  // Points every planned copy at its entry of `outputs`; false when one is missing or of another
  // type or region (the copy is then serial, from device 0).
  bool bind_output_copies(TensorMap& outputs);

  // Which device copies each distinct tile of the outputs device 0 does not hold whole
  // (assembled_); their entries of whole_ are cleared. A diagnostic when the tiles of one do not
  // cover it exactly once.
  Status plan_assembly();

  // One graph output's copy after a step: from `device`'s replica (or tile) into the caller's
  // tensor; device -1: not copied this way.
  struct OutputCopy {
    int64_t device = 0;
    const Tensor* src = nullptr;
    Tensor* dst = nullptr;
  };
  // An output assembled from tiles: each part is a device and the distinct tile it copies.
  struct Assembled {
    ValueId value;
    std::vector<std::pair<int64_t, const Tensor*>> parts;
  };

  const Graph& g_;
  std::vector<std::unique_ptr<DeviceExecutor>> devices_;
  ThreadedWorld world_;
  std::vector<Status> status_;
  std::vector<std::exception_ptr> exceptions_;  // per device, from the last step or compilation
  std::vector<std::thread> workers_;
  // The current step's arguments, published to the workers with generation_.
  const TensorMap* feeds_ = nullptr;
  ExecOptions options_;
  int threads_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> pending_{0};
  std::atomic<bool> stop_{false};
  std::vector<OutputCopy> copies_;  // one per graph output, once planned
  // Per device, once copies are planned: the program instructions it skips (output-only kernels
  // whose outputs another device copies, DeviceExecutor::skip_kernels) and which of its outputs()
  // it computes straight into the caller's tensors (those it copies; bind_outputs' `only`), and
  // no output (a step whose copies are not split binds none).
  std::vector<std::vector<char>> skips_, binds_, unbound_;
  bool copies_planned_ = false;
  std::vector<Assembled> assembled_;     // once planned (plan_assembly)
  std::vector<char> whole_;              // per device-0 outputs() entry: not assembled
  std::vector<OutputCopy> tile_copies_;  // this step's copies of assembled_'s parts
  std::optional<Status> assembly_;       // plan_assembly's verdict, once planned
  bool split_copy_ = false;              // this step: devices copy their shares of copies_
};

}  // namespace heddle
