// A run's inputs and results as bytes: `.npy` input files checked against the graph, the range of
// integer inputs, the feeds a run starts from, and the digests that tell bit-identical outputs and
// parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Tensor.h"
#include "heddle/runtime/Executor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Integer inputs must index something: the smallest table or class count they feed (2 if none).
int64_t integer_range(const Graph& g);

/// A hash (FNV-1a, hex) of the outputs' bytes in graph order: equal digests mean bit-identical
/// results, across runs and backends. Precondition: `outputs` holds every graph output.
std::string output_digest(const Graph& g, const TensorMap& outputs);

/// A hash (FNV-1a, hex) of every updated parameter's bytes, in the order of `updates` (the
/// training step's): equal digests mean bit-identical final parameters, across runs, strategies
/// and backends (`params_digest` of `heddle run --train --json`). Precondition: `outputs` holds
/// every `updated` value, whole.
std::string params_digest(const std::vector<ParamUpdate>& updates, const TensorMap& outputs);

/// Input tensors read from files, and what was wrong with them but not fatal.
struct InputFiles {
  std::vector<Tensor> tensors;       ///< in graph-input order; empty when no file was given
  std::vector<Diagnostic> warnings;  ///< non-finite values when they are allowed
};

/// The model inputs from `.npy` `files`, one per graph input in order, checked against `g`'s
/// inputs (count, shape, element kind). Non-finite values are an error with `finite_only` (a
/// reference check compares finite values only), else a warning.
Result<InputFiles> read_input_files(const Graph& g, const std::vector<std::string>& files,
                                    bool finite_only);

/// The feeds a run starts from: `inputs` (one per graph input, in order) and every parameter,
/// from `weights` where it has data, else init_param(name, type, seed).
TensorMap run_feeds(const Graph& g, const std::vector<Tensor>& inputs,
                    const std::map<ValueId, Tensor>& weights, uint64_t seed);

}  // namespace heddle
