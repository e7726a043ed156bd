// The single-device reference of the executor tests: every op of a graph over its whole index
// space, in order, through kernels::run.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"

namespace heddle::testing {

/// The outputs of `g` on `feeds` (every input and parameter), each op run once over its whole
/// index space; a kernel's error fails the calling test.
inline TensorMap op_by_op(const Graph& g, const TensorMap& feeds) {
  std::map<ValueId, Tensor> vals(feeds.begin(), feeds.end());
  for (const Op& op : g.ops()) {
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(&vals.at(x.value));
    std::vector<Tensor> outs;
    for (const auto& r : op.results) outs.emplace_back(g.type(r.value));
    std::vector<Tensor*> ptrs;
    for (auto& t : outs) ptrs.push_back(&t);
    Status st = kernels::run(op, op.space.box(), ins, ptrs);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    for (size_t k = 0; k < outs.size(); ++k) vals[op.results[k].value] = std::move(outs[k]);
  }
  TensorMap out;
  for (ValueId v : g.outputs()) out.emplace(v, vals.at(v));
  return out;
}

}  // namespace heddle::testing
