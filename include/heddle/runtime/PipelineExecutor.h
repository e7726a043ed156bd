// Running pipeline programs: every device walks its stage's order of blocks, with collectives
// inside the stage and activations and gradients between stages over Links; gradients summed
// over micro-batches, then each stage updates the parameters it owns. Threads or MPI ranks.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "heddle/runtime/Communicator.h"
#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/PipelineProgram.h"

namespace heddle {

/// What a device of a pipeline run starts from, by name: whole tensors, or tiles (tensors with
/// a region) covering at least what PipelineProgram::device_loads() names for the device.
struct PipelineFeeds {
  /// Model parameters and optimizer state (`m.<p>`, `v.<p>`, `vel.<p>`). A device reads those
  /// of its stage.
  std::map<std::string, Tensor> params;
  /// Per micro-batch, the model inputs (at micro-batch size).
  std::vector<std::map<std::string, Tensor>> inputs;
};

/// What a pipeline run ends with.
struct PipelineResult {
  /// Device 0: per micro-batch, every model output.
  std::vector<std::map<std::string, Tensor>> outputs;
  /// Device 0, training: every parameter's gradient summed over micro-batches (the gradient of
  /// the mean loss over the whole batch).
  std::map<std::string, Tensor> grads;
  /// Training: updated parameters and optimizer state, whole (a parameter the loss does not
  /// reach stays as fed); device 0 all of them, every other device those its stage reads or
  /// updates.
  std::map<std::string, Tensor> updated;
  /// What the device ran, counted as it ran (run_pipeline_threaded: summed over every device;
  /// equal to PipelineProgram::step_counts()).
  PipelineCounts counts;
};

/// Micro-batch `k` of `m` of a whole tensor: rows [k * n / m, (k + 1) * n / m) of dim 0, as a
/// whole tensor of its own. Precondition: rank >= 1, m divides dim 0, 0 <= k < m.
Tensor micro_batch_of(const Tensor& t, int64_t m, int64_t k);

/// The tensors concatenated along dim 0 (the inverse of micro_batch_of).
/// Precondition: non-empty, same dtype and trailing dims.
Tensor concat_micro_batches(const std::vector<Tensor>& parts);

/// One device's blocks compiled for many steps: each block's program becomes a DeviceExecutor
/// (its arena planned once) the first time the device runs it. Not thread-safe: one device.
class PipelineDeviceCache {
 public:
  PipelineDeviceCache();
  ~PipelineDeviceCache();
  PipelineDeviceCache(const PipelineDeviceCache&) = delete;
  PipelineDeviceCache& operator=(const PipelineDeviceCache&) = delete;
  /// The executor of `block`'s program of device `local` of its stage, compiled on first use.
  /// Precondition: the same `local` on every call; `block` outlives the cache.
  DeviceExecutor& executor(const StageBlock& block, int64_t local);
  /// The bytes of the arenas of every block compiled so far: what the device's compiled blocks
  /// hold between steps (each arena is its block's planned peak of tiles).
  int64_t arena_bytes() const;

 private:
  std::map<const StageBlock*, std::unique_ptr<DeviceExecutor>> executors_;
};

/// Runs global device `device`'s part of `program`: `stage_comm` runs the collectives of its
/// stage's programs (device ids within the stage), `links` carries what crosses stages. Kernel
/// errors keep the device in step with its peers and are reported at the end.
/// `cache` (optional) keeps the device's compiled blocks from step to step.
/// Precondition: every device of the mesh runs this with the same program and feeds.
Result<PipelineResult> run_pipeline_device(const PipelineProgram& program, int64_t device,
                                           Communicator& stage_comm, Links& links,
                                           const PipelineFeeds& feeds,
                                           const ExecOptions& options = {},
                                           PipelineDeviceCache* cache = nullptr);

/// Runs a pipeline program step after step on threads (one per device, per run), its devices'
/// compiled blocks kept between steps. One run at a time; `program` must outlive the runner.
class PipelineRunner {
 public:
  explicit PipelineRunner(const PipelineProgram& program);
  /// One step, as run_pipeline_threaded().
  Result<PipelineResult> run(const std::function<const PipelineFeeds&(int64_t)>& feeds_of,
                             const ExecOptions& options = {});
  /// The same with one set of feeds for every device.
  Result<PipelineResult> run(const PipelineFeeds& feeds, const ExecOptions& options = {});

 private:
  const PipelineProgram& program_;
  std::vector<std::unique_ptr<PipelineDeviceCache>> caches_;
};

/// Every device of `program` on its own thread (num_devices() threads); returns device
/// 0's result.
Result<PipelineResult> run_pipeline_threaded(const PipelineProgram& program,
                                             const PipelineFeeds& feeds,
                                             const ExecOptions& options = {});

/// The same with each device's own feeds: `feeds_of(d)` for global device d, which may hold
/// only the tiles PipelineProgram::device_loads(d) names (tensors with those regions).
/// Precondition: the references stay valid until the run returns.
Result<PipelineResult> run_pipeline_threaded(
    const PipelineProgram& program, const std::function<const PipelineFeeds&(int64_t)>& feeds_of,
    const ExecOptions& options = {});

/// Wraps a communicator whose device ids are global so that programs addressing the devices of
/// one stage (ids 0..n-1) reach global ids offset..offset+n-1.
class OffsetCommunicator : public Communicator {
 public:
  /// Precondition: `inner` outlives this object.
  OffsetCommunicator(Communicator& inner, int64_t offset, int64_t size)
      : inner_(inner), offset_(offset), size_(size) {}
  int64_t rank() const override { return inner_.rank() - offset_; }
  int64_t size() const override { return size_; }
  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override;

 private:
  Communicator& inner_;
  int64_t offset_, size_;
};

}  // namespace heddle
