// What both backends of `heddle run` share after executing: the summary (text or JSON). The
// reference check itself is the runtime's (heddle/runtime/ReferenceCheck.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "RunCommand.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ReferenceCheck.h"
#include "heddle/runtime/Session.h"

namespace heddle::cli {

/// The reference check of a run with the tolerances and seed of `o` (AdamW's rule when it is
/// the optimizer): `params` and `inputs` are the whole tensors the partitioned run starts from.
ReferenceCheck make_reference(const Graph& g, const RunOptions& o,
                              const std::vector<ParamUpdate>& updates, TensorMap params,
                              std::vector<Tensor> inputs);

/// What a run's summary says.
struct RunSummary {
  std::string note;          ///< how the plan was made
  std::string devices_text;  ///< `4 threads`, `4 MPI ranks`
  Mesh mesh;
  std::string strategy;
  ProgramStats stats;  ///< over every device's programs
  size_t reshards = 0;
  RunResult result;  ///< losses, step times (wall time: their sum)
  /// Per device, its peak bytes of tiles (JSON `peak_bytes_per_device`): the executor's planned
  /// arena on threads, else the programs' estimate (HostMemory.h); empty: unknown.
  std::vector<int64_t> peak_bytes_per_device;
  std::string digest;         ///< output_digest() of the last step
  std::string params_digest;  ///< training: params_digest() of the final parameters (JSON)
  const CheckErrors* check = nullptr;
  /// Pipelines: stages, micro-batches per step and the schedule followed (JSON `pipeline`).
  int64_t stages = 0, micro_batches = 0;
  std::string schedule;
  /// Training pipelines: the recompute mode executed and the kernel calls per step that
  /// recompute the forward, of all (JSON `pipeline.recompute`, `recompute_kernel_calls`,
  /// `kernel_calls`).
  std::string recompute;
  PipelineCounts counts;
  /// MPI: the most bytes of parameters and inputs one rank holds (generated, or cut from the
  /// weights and input files), and the model's total.
  std::optional<std::pair<int64_t, int64_t>> feed_bytes;
};

/// Prints the summary of a run of `g` (text, or JSON with --json); returns 0, or 3 after a
/// mismatch (also reported on stderr).
int report_run(const RunOptions& o, const Graph& g, const RunSummary& s);

}  // namespace heddle::cli
