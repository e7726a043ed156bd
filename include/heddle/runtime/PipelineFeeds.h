// Packing a step's tensors for a pipeline and unpacking its results: the run's tensors go by
// value id of the training step (or model) at the whole batch, the pipeline's by name and
// micro-batch. Both backends (threads, MPI) use them.
#pragma once

#include <vector>

#include "heddle/ops/Autodiff.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/PipelineExecutor.h"

namespace heddle {

/// The pipeline feeds of a step of `g` (the training step or the model the pipeline `P` was built
/// from, at the whole batch; parameters and inputs by value id in `feeds`, which may hold only
/// some parameters): parameters by name, inputs cut into P.micro_batches micro-batches along
/// dim 0.
PipelineFeeds pack_pipeline_feeds(const PipelineProgram& P, const Graph& g, const TensorMap& feeds);

/// Global device `device`'s tiles of the pipeline feeds of a step of `g`, exactly what
/// P.device_loads(device) names: parameters and state from init_param_tile(seed), micro-batch
/// tiles of the inputs cut from random_input_tile(seed + 1, int_hi) of the whole batch, so they
/// equal the whole tensors' elements. Precondition: `g` names every value P loads.
PipelineFeeds device_pipeline_feeds(const PipelineProgram& P, const Graph& g, int64_t device,
                                    uint64_t seed, int64_t int_hi);

/// The outputs of `g` from device 0's pipeline result: the model outputs (micro-batches
/// concatenated; a training loss averaged over them), updated parameters and state, and
/// gradients when `g` outputs them. Diagnostics: an output not split by batch along dim 0 with
/// several micro-batches, an output the pipeline did not produce.
Result<TensorMap> unpack_pipeline_result(const PipelineProgram& P, const Graph& g,
                                         const std::vector<ParamUpdate>& updates,
                                         const PipelineResult& r);

}  // namespace heddle
