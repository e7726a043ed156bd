// The reference interpreter: runs any verified graph on one device with real data, op by op over
// whole index boxes, deterministically. The only place tensors for a whole graph are allocated.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Options of the interpreter.
struct InterpreterOptions {
  uint64_t seed = 0;     ///< parameter initialisation seed; default 0
  int blas_threads = 1;  ///< OpenBLAS threads (1 keeps results bit-identical); default 1
};

/// Deterministic parameter initialisation by name and shape: names containing `gamma` or ending
/// in `.g` are ones; `beta`, `bias`, names ending in `.b`, and optimizer state (`m.`, `v.`,
/// `vel.` prefixes) are zeros; other rank-1 params zeros; the rest uniform in +-1/sqrt(fan_in)
/// (fan_in: dim 0 of a matrix, C*KH*KW of a conv kernel), seeded by `seed` and the name.
Tensor init_param(const std::string& name, const TensorType& type, uint64_t seed);

/// Inputs for `g`: floats uniform in [-1, 1), integers uniform in [0, int_hi), seeded.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, int64_t int_hi);

/// Holds the parameters of one graph and runs it.
class Interpreter {
 public:
  /// Precondition: `g` passed verify() and outlives the interpreter.
  explicit Interpreter(const Graph& g, InterpreterOptions options = {});

  /// The current value of parameter `v`. Precondition: v is a param of the graph.
  const Tensor& param(ValueId v) const;
  /// Replaces parameter `v`. Precondition: same type.
  void set_param(ValueId v, Tensor t);

  /// Runs the graph on `inputs` (one per graph input, in order); returns the outputs in order.
  /// `optimizer_step` > 0 overrides adamw's step attribute. Diagnostics for wrong input types and
  /// data errors (labels out of range).
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, int64_t optimizer_step = 0);
  /// The value of `v` after the last run (inputs, params and every result).
  const Tensor& value(ValueId v) const;
  /// Called by run() with each op's results right after the op ran, before any later op reads
  /// them; may change them (ReferenceCheck moves ReLU inputs within rounding of zero across it).
  /// Empty (the default): results are left as computed.
  void set_after_op(std::function<void(ValueId, Tensor&)> after_op) {
    after_op_ = std::move(after_op);
  }

 private:
  const Graph& g_;
  std::vector<Tensor> values_;
  std::vector<bool> allocated_;  ///< result buffers already allocated by an earlier run
  std::function<void(ValueId, Tensor&)> after_op_;  ///< set_after_op's callback, or empty
};

}  // namespace heddle
