// The single-device reference a partitioned run is checked against: the interpreter runs the
// same step from the same parameters and every output is compared within a tolerance, with
// AdamW's rule for weights whose gradient is fp32 noise.
#pragma once

#include <map>
#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"

namespace heddle {

/// How outputs are compared with the reference.
struct CheckOptions {
  /// Relative tolerance (default 1e-3, `heddle run --check`'s), against an element's magnitude or
  /// 1% of its tensor's largest magnitude, whichever is larger.
  double rtol = 1e-3;
  double atol = 1e-4;  ///< absolute tolerance (default 1e-4)
  uint64_t seed = 0;   ///< the interpreter's seed for random ops (default 0)
  /// The training step's optimizer is AdamW: updated weights whose gradient is ~0 are compared
  /// through their gradients only (see ReferenceCheck). Default false.
  bool adamw = false;
  /// A step that mismatches is re-run with up to this many ReLU inputs that lie within fp32
  /// rounding of zero moved across it, one at a time, most ambiguous first, each kept if it
  /// brings the outputs closer (see ReferenceCheck). Default 16; 0 turns the search off.
  int kink_tries = 16;
};

/// How a run's outputs compared with the reference, over all steps checked.
struct CheckErrors {
  /// Largest absolute error, and largest relative one (against the same magnitude as `ok`).
  double max_abs = 0, max_rel = 0;
  /// Every element within atol + rtol * max(|want|, 1% of max |want| over its tensor).
  bool ok = true;
  double reference_time_s = 0;  ///< time the interpreter took, summed over steps
  int64_t adamw_skipped = 0;    ///< updated weights compared through their gradients only
  /// ReLU inputs within rounding of zero whose side the reference took from the run (summed
  /// over steps; see ReferenceCheck).
  int64_t kinks_flipped = 0;
};

/// The single-device interpreter running the same steps as a partitioned run and comparing every
/// output (tolerance atol + rtol * max(|want|, 1% of the tensor's largest |want|): fp32 rounding
/// follows the size of a sum's terms, so elements that cancel to small values are judged against
/// their tensor's scale). It holds its own copy of the parameters and follows
/// the run's updates after each step, so every step starts where the partitioned run's did.
/// AdamW's first steps move each weight by about lr * sign(gradient); where a gradient is ~0 that
/// sign is fp32 noise, so those elements of updated weights are compared through their gradients
/// (which `g` must then output) only.
/// A ReLU input that lies within fp32 rounding of zero (|x| <= 1e-6 of its tensor's largest) may
/// fall on either side in a run whose sums round differently, and the gradient behind it then
/// differs by its whole dy there, in every gradient before it (an imported ResNet-50's layer3.2
/// had an input of 7.6e-7 that a run computed as -2.9e-5). When a step mismatches, such inputs
/// are moved across zero in the reference one at a time (most ambiguous first, at most
/// CheckOptions::kink_tries runs), each kept if it lowers the summed excess error; the step passes
/// only if the outputs then match. A wrong output stays wrong: moving an input across zero changes
/// the forward by that input only, and the gradients by whole dy terms.
class ReferenceCheck {
 public:
  /// `params`: every parameter of `g` by id; `inputs`: the model inputs in graph-input order.
  /// Precondition: `g` (verified) outlives this object; `updates` are its training updates
  /// (empty for a forward-only run).
  ReferenceCheck(const Graph& g, std::vector<ParamUpdate> updates, TensorMap params,
                 std::vector<Tensor> inputs, const CheckOptions& options);
  /// Runs step `step` (1-based) on the interpreter, compares its outputs with `got` (every output
  /// of g, whole), then moves the parameters to the run's updated ones. Interpreter errors are
  /// diagnostics.
  Status check_step(int step, const TensorMap& got);
  /// The errors over every step checked so far.
  const CheckErrors& errors() const { return errors_; }

 private:
  // Compares one output into `e`; returns the summed excess of its errors over the tolerance.
  double compare(const Tensor& want, const Tensor& got, CheckErrors& e) const;
  // Compares every output of one reference step into `e`; returns the summed excess.
  double compare_step(const std::vector<Tensor>& want, const TensorMap& got, CheckErrors& e) const;
  // Runs the interpreter on step `step`, adding its time to errors_.
  Result<std::vector<Tensor>> run_reference(int step);

  const Graph& g_;
  std::vector<ParamUpdate> updates_;
  TensorMap params_;
  std::vector<Tensor> inputs_;
  CheckOptions options_;
  Interpreter interp_;
  std::map<ValueId, ValueId> adamw_grad_;  // updated param -> its gradient
  CheckErrors errors_;
};

}  // namespace heddle
