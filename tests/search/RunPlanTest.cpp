// plan_run() under `auto`: the intra-op ILP's plan lists the reshards between its strategies, as
// a propagated plan does.
#include <gtest/gtest.h>

#include "heddle/ops/zoo/Zoo.h"
#include "heddle/search/RunPlan.h"
#include "heddle/sharding/OpStrategy.h"

namespace heddle::search {
namespace {

TEST(RunPlan, AutoListsTheReshardsBetweenTheIlpsStrategies) {
  for (const char* name : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    Graph g = *zoo::build_zoo_model(name);
    auto spec = requested_strategy("2", "auto");
    ASSERT_TRUE(spec.ok()) << spec.error().to_string();
    auto r = plan_run(g, "2", *spec, {});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    const ShardingPlan& plan = r->propagation.plan;
    // Where the ILP split a value one way and a consumer wants it another, data moves: a plan
    // with sharded ops and replicated parameters has at least one such edge per layer.
    size_t moved = 0;
    for (size_t id = 0; id < g.ops().size(); ++id) {
      const OpId op = static_cast<OpId>(id);
      auto p = derive_placements(g, op, plan.mesh, plan.ops[id]);
      ASSERT_TRUE(p.ok());
      for (size_t k = 0; k < g.op(op).inputs.size(); ++k) {
        const ValueId v = g.op(op).inputs[k].value;
        const OpId producer = g.value(v).producer;
        if (producer == kNoOp) continue;
        auto q = derive_placements(g, producer, plan.mesh, plan.ops[producer]);
        ASSERT_TRUE(q.ok());
        moved += q->results[g.value(v).result_index].sharding != p->inputs[k].sharding;
      }
    }
    EXPECT_GT(r->propagation.reshards.size(), 0u);
    EXPECT_LE(r->propagation.reshards.size(), moved);
    for (const Reshard& s : r->propagation.reshards) {
      EXPECT_NE(s.from, s.to);
      auto p = derive_placements(g, s.consumer, plan.mesh, plan.ops[s.consumer]);
      ASSERT_TRUE(p.ok());
      bool wanted = false;
      for (size_t k = 0; k < g.op(s.consumer).inputs.size(); ++k)
        wanted |= g.op(s.consumer).inputs[k].value == s.value && p->inputs[k].sharding == s.to;
      EXPECT_TRUE(wanted) << "reshard of %" << s.value << " is not what its consumer reads";
    }
  }
}

}  // namespace
}  // namespace heddle::search
