#include "heddle/runtime/OutputKernels.h"

#include <algorithm>
#include <set>

namespace heddle {

std::vector<OutputKernel> output_only_kernels(const Graph& g, const DeviceProgram& p) {
  const std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  // Values some instruction touches other than by defining them in a kernel: read by a kernel,
  // collected, fetched, loaded or freed. Filled from the end, so at instruction i it holds what
  // the instructions after i touch.
  std::set<ValueId> later;
  std::vector<OutputKernel> found;
  for (size_t i = p.instrs.size(); i-- > 0;) {
    const Instr& in = p.instrs[i];
    if (in.kind != Instr::Kind::kKernel) {
      later.insert(in.value);
      continue;
    }
    OutputKernel k{i, {}};
    bool only = in.ring < 0 && !in.calls.empty();
    for (const KernelCall& kc : in.calls)
      for (const auto& r : g.op(kc.op).results) {
        const bool temp = std::find(in.temporaries.begin(), in.temporaries.end(), r.value) !=
                          in.temporaries.end();
        if (temp) continue;
        only = only && outputs.count(r.value) && !later.count(r.value);
        k.outputs.push_back(r.value);
      }
    for (const KernelCall& kc : in.calls)
      for (const auto& x : g.op(kc.op).inputs) later.insert(x.value);
    if (only && !k.outputs.empty()) {
      std::sort(k.outputs.begin(), k.outputs.end());
      found.push_back(std::move(k));
    }
  }
  std::reverse(found.begin(), found.end());
  return found;
}

}  // namespace heddle
