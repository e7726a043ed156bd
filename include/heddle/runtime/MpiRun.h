// Running a plan on MPI ranks, one process per device: what each rank feeds its program (only its
// own tiles), the communicators it prepares, the step loops (SPMD programs and pipelines), the
// launch agreement (ranks compare digests of how they were started before any work) and the
// completion agreement (nobody reports success before every rank has). The CLI parses, plans
// and prints around these.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/InstrProfile.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/runtime/PipelineProgram.h"
#include "heddle/runtime/SequenceLayout.h"
#include "heddle/runtime/Session.h"
#include "heddle/sharding/Mesh.h"
#include "heddle/sharding/ShardingPlan.h"

namespace heddle {

/// Test-only fault injection, read from the environment: HEDDLE_TEST_FAIL_RANK=R makes rank R
/// fail just before its HEDDLE_TEST_FAIL_AT-th collective (default 1) as HEDDLE_TEST_FAIL_MODE
/// says: `throw` (default: an exception, reported to the peers), `kill` (SIGKILL), `hang`
/// (sleeps forever), `stall:S` (sleeps S seconds, then goes on: a slow rank, not a dead one),
/// `skip` (leaves that and every later collective out: out of step, the rank goes on to the
/// agreement after the step while its peers wait in the collective), `disagree`
/// (runs normally, then claims one step more at the completion agreement).
struct FaultPlan {
  enum class Mode : uint8_t { kThrow, kKill, kHang, kStall, kSkip, kDisagree };
  int64_t rank = -1;  ///< the rank that fails; -1 (default): none
  int64_t at = 1;     ///< before its at-th collective (default 1)
  Mode mode = Mode::kThrow;
  double stall_s = 0;  ///< kStall: seconds to sleep
  /// The plan the HEDDLE_TEST_FAIL_* variables describe (none when unset).
  static FaultPlan from_environment();
};

/// The mesh-axis groups collectives run over: for every non-empty set of mesh axes, the partition
/// of the devices into groups that differ only along those axes (each in rank order), as
/// MpiCommunicator::prepare() takes them.
std::vector<std::vector<std::vector<int64_t>>> mesh_partitions(const Mesh& mesh);

/// What a run starts from beyond the seed: an ONNX model's weights and the --input files (whole,
/// read by every rank; empty when not given).
struct HostData {
  std::map<ValueId, Tensor> weights;
  std::vector<Tensor> inputs;  ///< by graph-input position
  /// Parameter `v` whole: its weights, else generated from `seed` (init_param).
  Tensor param(const Graph& g, ValueId v, uint64_t seed) const;
  /// The whole model inputs: the files, else generated from seed + 1 (random_inputs).
  std::vector<Tensor> model_inputs(const Graph& g, uint64_t seed, int64_t int_hi) const;
};

/// This device's tiles of the graph inputs and parameters its program loads: per value, the
/// smallest box covering its loads, cut from the weights and input files where given, else
/// generated element-identical to the whole-tensor helpers (parameters from `seed`, inputs from
/// seed + 1, as the threads backend does).
/// With a `layout` not in order, the tiles are those of the tensors it names permuted into its
/// order (SequenceLayout.h), as the program reads them.
TensorMap shard_feeds(const Graph& g, const DeviceProgram& p, uint64_t seed, int64_t int_hi,
                      const HostData& host, const SequenceLayout& layout = {});

/// Options of the rank step loops.
struct MpiRunOptions {
  /// Steps, training, the reference (rank 0 only; not owned) and the per-step callback (called on
  /// rank 0 only). Default: one forward step.
  StepLoopOptions loop;
  uint64_t seed = 0;   ///< parameters from seed, inputs from seed + 1 (default 0)
  int64_t int_hi = 2;  ///< integer inputs are drawn below this (integer_range of the graph)
  FaultPlan fault;     ///< test-only fault injection (default none)
  /// The order the SPMD program holds the sequence in (zigzag_layout(); its program lowered from
  /// with_layout()): feeds permuted into it, outputs back. Default: in order.
  SequenceLayout layout;
};

/// What one rank's run gives back.
struct MpiRankRun {
  RunResult result;  ///< rank 0: the last step's outputs (whole), losses, step times
  /// The most bytes of parameters and inputs any rank generated or cut (its tiles).
  int64_t feed_bytes_max = 0;
  /// Per rank, the bytes of tiles its compiled executors hold: its program's arena (SPMD), or
  /// the arenas of every block of its stage, compiled once and all held between steps (pipelines).
  std::vector<int64_t> peak_bytes_per_device;
  /// SPMD runs with options.loop.profile: this rank's program's instruction times over the steps
  /// after the first (the only step of a one-step run), as Session::instr_times() holds a
  /// thread-device's; empty otherwise.
  InstrTimes instr_times;
};

/// A failure of a rank's run that every rank agreed on (a kernel's diagnostic, ranks that ran a
/// different number of steps): the rank that failed holds its diagnostic; the others one naming
/// it (kind kPeerLost). Failures that leave the ranks out of step (a peer gone, a timeout, an
/// exception) end the job instead: logged with the rank's prefix, exit code by kind.
struct MpiRunFailure {
  Diagnostic error;
  FailureKind kind = FailureKind::kUser;
};

/// A rank's run: the result, or the agreed failure.
struct MpiOutcome {
  std::optional<MpiRankRun> run;
  std::optional<MpiRunFailure> failure;
};

/// Runs this rank's SPMD program `own` (device mpi.rank() of `mesh`, lowered from `g`, whose
/// training `updates` these are; empty for forward-only) for `options.loop.steps` steps. The
/// executor is compiled once; each step starts from this rank's updated tiles. Ends with the
/// completion agreement. Precondition: mpi.size() == mesh.num_devices(); every rank calls this
/// with the same plan.
MpiOutcome run_spmd_rank(MpiCommunicator& mpi, const Graph& g,
                         const std::vector<ParamUpdate>& updates, const Mesh& mesh,
                         const DeviceProgram& own, HostData host, const MpiRunOptions& options);

/// Runs this rank's part of a pipeline (its stage's blocks; collectives inside the stage over
/// MPI, activations and gradients to other stages point to point); rank 0 unpacks the results.
/// Each block is compiled once (its first step) and kept. Inputs are generated from the seed;
/// parameters and optimizer state are cut from `weights` (by value id of `g`, whole or tiles
/// covering this rank's: a checkpoint resumed) where given, else generated from the seed.
/// After each training step `options.loop.after_update` (a checkpoint writer) gets this rank's
/// tiles by value id of `g`. Ends with the completion agreement.
MpiOutcome run_pipeline_rank(MpiCommunicator& mpi, const Graph& g,
                             const std::vector<ParamUpdate>& updates, const PipelineProgram& P,
                             const Mesh& mesh, const std::map<ValueId, Tensor>& weights,
                             const MpiRunOptions& options);

/// Logs `d` as this rank's failure (rank and host prefix) and ends the whole job with the exit
/// code of `kind` (telling the other ranks first). For failures that leave ranks out of step.
[[noreturn]] void fail_job(MpiCommunicator& mpi, const Diagnostic& d, FailureKind kind);

/// One thing ranks must agree on before a run: a name for messages and a digest.
struct LaunchPart {
  std::string name;  ///< `arguments`, `model file`, `input file 1`, `plan`, `heddle binary` ...
  uint64_t digest = 0;
  std::string detail;  ///< this rank's value in words (shown when short), may be empty
};

/// The launch agreement: collective over all ranks (at most 32 parts, the same names in the same
/// order on every rank). Every rank learns every rank's digests; the diagnostic (the same on
/// every rank) names each part that differs and the ranks whose digest is not rank 0's.
Status agree_on_launch(MpiCommunicator& mpi, const std::vector<LaunchPart>& parts);

/// FNV-1a 64 of `bytes`, continuing from `h` (the default is the offset basis): the digests of
/// the launch agreement.
uint64_t fnv1a(std::string_view bytes, uint64_t h = 1469598103934665603ULL);

/// Rank 0's `values` on every rank (collective; others pass anything): how rank 0's plan for
/// `--strategy auto` reaches the ranks, so hosts with different CPU profiles run one plan.
Result<std::vector<int64_t>> share_from_root(MpiCommunicator& mpi,
                                             const std::vector<int64_t>& values);

/// A sharding plan's per-op strategies as integers (share_from_root) and back on `mesh`.
/// Precondition: the plan pins nothing (`pinned` empty).
std::vector<int64_t> encode_plan(const ShardingPlan& plan);
Result<ShardingPlan> decode_plan(const std::vector<int64_t>& code, const Mesh& mesh);

}  // namespace heddle
