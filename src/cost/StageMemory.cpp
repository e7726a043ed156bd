#include "StageMemory.h"

#include <algorithm>

#include "heddle/cost/MemoryModel.h"

namespace heddle::cost {

double layer_saved(const ModelParts& P, Recompute r) {
  double saved = P.layer.saved_bytes;
  if (r == Recompute::kSelective) saved -= P.layer.attention_bytes;
  if (r == Recompute::kFull) saved = P.boundary_bytes;
  return saved;
}

void stage_memory(const StageMemoryInput& in, StageResult& st) {
  const ModelParts& P = *in.parts;
  const DeviceProfile& dev = *in.device;
  // The working set of the block running: a layer's full activations while its backward
  // recomputes them (full), the attention recomputed (selective); a forward step holds a layer's
  // values and the embedding's and head's.
  double transient = in.r == Recompute::kFull        ? P.layer.saved_bytes
                     : in.r == Recompute::kSelective ? P.layer.attention_bytes
                                                     : 0;
  if (!in.train) transient = P.layer.saved_bytes + P.prefix.saved_bytes + P.suffix.saved_bytes;
  // The last stage's logits in the compute precision: the head's output before the loss takes
  // its fp32 copy (and the gradient it hands back), or a forward step's output.
  if (in.last) transient += P.output_elements * dev.element_bytes;
  if (in.train && in.offload == Offload::kActivations) {
    // Kept activations wait on the host; the device holds the layer being copied out or back in
    // and the one computing.
    st.host_bytes += in.units * layer_saved(P, in.r) * static_cast<double>(in.host_micro_batches);
    transient += 2 * layer_saved(P, in.r);
  }
  st.in_flight = in.in_flight;
  st.activation_bytes = in.kept + transient;
  st.buffer_bytes = 0;
  if (in.train && (in.offload == Offload::kNone || in.offload == Offload::kActivations)) {
    // ZeRO-3 gathers per layer unit, or the stage's embedding or head when larger.
    double gathered = P.layered ? P.layer.param_elements : 0;
    if (in.first) gathered = std::max(gathered, P.prefix.param_elements);
    if (in.last) gathered = std::max(gathered, P.suffix.param_elements);
    st.buffer_bytes = gradient_buffer_bytes(in.zero, in.group, in.params, gathered,
                                            dev.element_bytes, in.grad_bytes);
  }
  st.allocator_bytes = allocator_allowance_bytes(dev, st.activation_bytes + st.buffer_bytes);
  st.peak_memory_bytes =
      st.state_bytes + st.buffer_bytes + st.activation_bytes + st.allocator_bytes;
}

}  // namespace heddle::cost
