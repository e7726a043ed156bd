#include "heddle/cost/ComputeCost.h"

#include <algorithm>

#include "heddle/ops/OpCost.h"

namespace heddle::cost {

namespace {

bool uses(const Operand& o, int64_t dim) {
  const AffineMap& m = o.proj.map();
  for (int64_t r = 0; r < m.out_rank(); ++r)
    if (m.at(r, dim) != 0) return true;
  return false;
}

}  // namespace

double kernel_elements(const Op& op, const Box& box) {
  int64_t window = 1;
  for (const Operand& in : op.inputs)
    window = std::max<int64_t>(window, in.proj.window().product());
  return static_cast<double>(box.volume()) * static_cast<double>(window);
}

std::string kernel_rate_key(const Op& op) {
  std::string key(op_kind_name(op.kind));
  if (op.kind == OpKind::kElementwiseGrad)
    if (auto fn = op.attrs.find("fn"); fn != op.attrs.end())
      if (const auto* s = std::get_if<std::string>(&fn->second)) key += ":" + *s;
  return key;
}

double stream_rate(const DeviceProfile& device, bool gemm) {
  if (!gemm && device.elementwise_bandwidth > 0) return device.elementwise_bandwidth;
  return device.memory_bandwidth * device.memory_efficiency;
}

OpTime op_time(const Graph& g, OpId id, const Box& local, const DeviceProfile& device) {
  const Op& op = g.op(id);
  OpCost c = op_cost(g, id);
  double total = static_cast<double>(std::max<int64_t>(op.space.volume(), 1));
  double part = static_cast<double>(local.volume()) / total;
  OpTime t;
  t.flops = c.flops * part;
  // Graphs are typed f32; the device computes in its own element size.
  t.bytes = (c.bytes_read + c.bytes_written) * part * device.element_bytes / 4.0;
  double compute = 0;
  OpCategory cat = op_kind_info(op.kind).category;
  auto rate = device.kernel_element_s.find(kernel_rate_key(op));
  if (rate == device.kernel_element_s.end())
    rate = device.kernel_element_s.find(std::string(op_kind_name(op.kind)));
  if (rate != device.kernel_element_s.end()) {
    // The kernel's measured time per point already includes its memory traffic.
    t.measured = true;
    t.compute_s = kernel_elements(op, local) * rate->second;
    t.seconds = t.compute_s + device.launch_s;
    return t;
  }
  if (t.flops > 0) {
    if ((cat == OpCategory::kContraction || cat == OpCategory::kWindow) && op.inputs.size() >= 2) {
      double m = 1, n = 1, k = 1;
      IVec ext = local.shape();
      for (int64_t i = 0; i < op.space.rank(); ++i) {
        double e = static_cast<double>(ext[i]);
        bool in0 = uses(op.inputs[0], i), in1 = uses(op.inputs[1], i);
        if (op.space.dim(i).is_reduce())
          k *= e;
        else if (in1 && !in0)
          n *= e;
        else if (!(in0 && in1) || device.batched_gemm)
          m *= e;  // batch dims (used by both inputs) fold into M in one batched call
      }
      k *= static_cast<double>(std::max<int64_t>(op.inputs[1].proj.window().product(), 1));
      double eff = device.gemm_fraction(std::max(m, 1.0), std::max(n, 1.0), std::max(k, 1.0));
      t.efficiency = eff;
      // A linear layer (a contraction reading a parameter) may run in another precision (fp8).
      bool linear = false;
      for (const Operand& in : op.inputs)
        linear = linear || g.value(in.value).role == ValueRole::kParam;
      double peak =
          linear && device.param_gemm_flops > 0 ? device.param_gemm_flops : device.peak_flops;
      compute = t.flops / (peak * eff);
    } else {
      // Vector work (elementwise, normalization) runs on the SIMT units, not the tensor cores.
      compute = t.flops / (device.vector_flops > 0 ? device.vector_flops : device.peak_flops);
    }
  }
  t.compute_s = compute;
  t.gemm = t.efficiency > 0;
  t.seconds = std::max(compute, t.bytes / stream_rate(device, t.gemm)) + device.launch_s;
  return t;
}

OpTime with_bytes(const OpTime& t, double bytes, bool fused, const DeviceProfile& device) {
  HEDDLE_ASSERT(bytes >= 0) << bytes;
  OpTime r = t;
  r.bytes = bytes;
  double memory = t.measured ? 0 : bytes / stream_rate(device, t.gemm);
  r.seconds = std::max(t.compute_s, memory) + (fused ? 0 : device.launch_s);
  return r;
}

bool fusable(OpKind kind) {
  OpCategory c = op_kind_info(kind).category;
  return c == OpCategory::kUnary || c == OpCategory::kBinary || c == OpCategory::kSelect ||
         c == OpCategory::kLayout || c == OpCategory::kNormalization;
}

}  // namespace heddle::cost
