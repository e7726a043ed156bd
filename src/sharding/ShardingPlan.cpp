#include "heddle/sharding/ShardingPlan.h"

#include "heddle/ir/TextPrinter.h"

namespace heddle {

ShardingPlan ShardingPlan::replicated(const Graph& g, const Mesh& mesh) {
  return {mesh,
          std::vector<OpStrategy>(static_cast<size_t>(g.num_ops()),
                                  OpStrategy::replicated(mesh.rank())),
          {}};
}

Status ShardingPlan::check(const Graph& g) const {
  if (static_cast<int64_t>(ops.size()) != g.num_ops())
    return Diagnostic("sharding plan has " + std::to_string(ops.size()) +
                      " op strategies for a graph of " + std::to_string(g.num_ops()) + " ops");
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (ops[i].rank() != mesh.rank())
      return Diagnostic("strategy of op " + std::to_string(i) + " has " +
                        std::to_string(ops[i].rank()) + " axes; the mesh " + mesh.to_string() +
                        " has " + std::to_string(mesh.rank()));
    auto p = derive_placements(g, i, mesh, ops[i]);
    HEDDLE_TRY(p);
  }
  return {};
}

std::string ShardingPlan::to_string(const Graph& g) const {
  std::string s;
  for (OpId i = 0; i < g.num_ops(); ++i) {
    const Op& op = g.op(i);
    s += value_ref(g.value(op.results[0].value).name) + " = " + std::string(op_kind_name(op.kind)) +
         " " + ops[i].to_string(op.space, mesh);
    auto p = derive_placements(g, i, mesh, ops[i]);
    if (!p.ok()) {
      s += "  (invalid: " + p.error().message + ")\n";
      continue;
    }
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      s += "  " + value_ref(g.value(op.inputs[k].value).name) + " " +
           p->inputs[k].sharding.to_string();
      if (p->inputs[k].has_halo())
        s += " halo " + p->inputs[k].halo_lo.to_string() + p->inputs[k].halo_hi.to_string();
    }
    s += " -> " + p->results[0].sharding.to_string() + "\n";
  }
  return s;
}

}  // namespace heddle
