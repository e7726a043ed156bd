// What both backends of `heddle run` share after executing: the single-device reference check of
// each step, and the summary (text or JSON).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "RunCommand.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Lower.h"

namespace heddle::cli {

/// How a run's outputs compared with the reference, over all steps checked.
struct CheckErrors {
  double max_abs = 0, max_rel = 0;
  bool ok = true;
  double reference_time_s = 0;
  int64_t adamw_skipped = 0;  ///< updated weights compared through their gradients only
};

/// The single-device interpreter running the same step as a partitioned run, from the same
/// parameters, and comparing every output (tolerance o.atol + o.rtol * |want|). AdamW's first
/// steps move each weight by about lr * sign(gradient); where a gradient is ~0 that sign is fp32
/// noise, so those elements of updated weights are compared through their gradients (which `g`
/// must then output) only.
class ReferenceCheck {
 public:
  /// Precondition: `g` (verified) outlives this object; `updates` are its training updates.
  ReferenceCheck(const Graph& g, const RunOptions& o, const std::vector<ParamUpdate>& updates);
  /// Runs step `s` from `params` (every parameter of g, by id) on `inputs` and compares the
  /// outputs with `got` (every output of g). Interpreter errors are diagnostics.
  Status check_step(int s, const TensorMap& params, const std::vector<Tensor>& inputs,
                    const TensorMap& got);
  const CheckErrors& errors() const { return errors_; }

 private:
  void compare(const Tensor& want, const Tensor& got);

  const Graph& g_;
  const RunOptions& o_;
  Interpreter interp_;
  std::map<ValueId, ValueId> adamw_grad_;  // updated param -> its gradient
  CheckErrors errors_;
};

/// What a run's summary says.
struct RunSummary {
  std::string note;          ///< how the plan was made
  std::string devices_text;  ///< `4 threads`, `4 MPI ranks`
  Mesh mesh;
  std::string strategy;
  ProgramStats stats;  ///< over every device's programs
  size_t reshards = 0;
  double wall_s = 0;
  std::vector<double> losses;  ///< per training step
  std::string digest;          ///< output_digest() of the last step
  const CheckErrors* check = nullptr;
  /// Pipelines: stages, micro-batches per step and the schedule followed (JSON `pipeline`).
  int64_t stages = 0, micro_batches = 0;
  std::string schedule;
  /// MPI: the most bytes of parameters and inputs one rank holds (generated, or cut from the
  /// weights and input files), and the model's total.
  std::optional<std::pair<int64_t, int64_t>> feed_bytes;
  /// Threads backend: each device's planned peak of tile memory (ThreadedRunner), in device
  /// order (JSON `peak_bytes_per_device`); empty when not known.
  std::vector<int64_t> peak_bytes_per_device;
};

/// Prints the summary of a run of `g` (text, or JSON with --json); returns 0, or 1 after a
/// mismatch (also reported on stderr).
int report_run(const RunOptions& o, const Graph& g, const RunSummary& s);

}  // namespace heddle::cli
