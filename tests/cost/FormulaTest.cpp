// The closed forms of the cost model against published figures: collectives (nccl-tests), ZeRO
// model states (arXiv 1910.02054, Figure 1), activations (arXiv 2205.05198), Megatron FLOPs.
#include <gtest/gtest.h>

#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/MemoryModel.h"
#include "heddle/cost/ModelFlops.h"
#include "heddle/cost/Simulator.h"
#include "heddle/ops/OpCost.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/sharding/Reshard.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle::cost {
namespace {

TEST(Collectives, AlphaBetaFormulas) {
  LinkClass l{"test", 100e9, 5e-6};
  double S = 1e9;
  EXPECT_DOUBLE_EQ(collective_time(Collective::kAllReduce, 8, S, l),
                   2 * 7 * 5e-6 + 2 * 7.0 / 8 * S / 100e9);
  EXPECT_DOUBLE_EQ(collective_time(Collective::kAllGather, 4, S, l),
                   3 * 5e-6 + 3.0 / 4 * S / 100e9);
  EXPECT_DOUBLE_EQ(collective_time(Collective::kReduceScatter, 4, S, l),
                   collective_time(Collective::kAllGather, 4, S, l));
  EXPECT_DOUBLE_EQ(collective_time(Collective::kAllToAll, 2, S, l), 5e-6 + 0.5 * S / 100e9);
  EXPECT_DOUBLE_EQ(collective_time(Collective::kSendRecv, 2, S, l), 5e-6 + S / 100e9);
  EXPECT_EQ(collective_time(Collective::kAllReduce, 1, S, l), 0);
  EXPECT_EQ(collective_time(Collective::kSlice, 8, S, l), 0);
  // All-reduce = reduce-scatter + all-gather (the ring decomposition).
  EXPECT_NEAR(collective_time(Collective::kAllReduce, 16, S, l),
              collective_time(Collective::kReduceScatter, 16, S, l) +
                  collective_time(Collective::kAllGather, 16, S, l),
              1e-12);
}

TEST(Collectives, MeshAxesMapOntoLinks) {
  auto c = cluster_preset("a100x128");
  ASSERT_TRUE(c.ok());
  auto mesh = Mesh::parse("dp=16,tp=8");
  ASSERT_TRUE(mesh.ok());
  AlphaBetaCost cost(*c, *mesh);
  EXPECT_EQ(cost.link(1).name, "nvlink3");  // tp: 8 devices inside a node
  EXPECT_EQ(cost.link(0).name, "ib-hdr");   // dp spans nodes
  auto small = Mesh::parse("dp=2,tp=4");
  ASSERT_TRUE(small.ok());
  AlphaBetaCost inner(*c, *small);
  EXPECT_EQ(inner.link(0).name, "nvlink3");  // 2 x 4 fits one node
  // A 1 GB all-reduce over 8 GPUs in a node at 230 GB/s bus bandwidth: about 7.6 ms.
  EXPECT_NEAR(cost.cost(Collective::kAllReduce, 1, 8, 1e9), 2 * 7 / 8.0 * 1e9 / 230e9 + 14e-5,
              1e-9);
}

// stage_plan prices the reshards propagation inserts in the cluster's seconds, in the device's
// element size: a bf16 device moves half the bytes of the float32 graph. (Propagation once scaled
// these seconds by a nominal time per byte, 1e-10, so it barely saw communication.)
TEST(Collectives, StagePlanPricesReshardsInTheClustersSeconds) {
  zoo::ZooOverrides o;
  o.batch = 8;
  auto g = zoo::build_zoo_model("gpt-tiny", o);
  auto c = cluster_preset("a100x8");
  auto spec = StrategySpec::parse("dp=2,tp=4");
  ASSERT_TRUE(g.ok() && c.ok() && spec.ok());
  auto mesh = spec->mesh(8);
  ASSERT_TRUE(mesh.ok());
  auto prop = stage_plan(*g, *mesh, *c, *spec);
  ASSERT_TRUE(prop.ok()) << prop.error().to_string();
  ASSERT_FALSE(prop->reshards.empty());
  ASSERT_EQ(c->device.element_bytes, 2);
  AlphaBetaCost links(*c, *mesh);
  for (const Reshard& r : prop->reshards) {
    auto plan = plan_reshard(g->type(r.value), *mesh, r.from, r.to, AlphaBetaCost(*c, *mesh, 0.5));
    ASSERT_TRUE(plan.ok());
    EXPECT_DOUBLE_EQ(r.seconds, plan->cost) << r.from.to_string() << " -> " << r.to.to_string();
    double full = 0;  // the same steps on float32 bytes
    for (const ReshardStep& st : plan->steps)
      full += links.cost(st.op, st.axis, mesh->size(st.axis), st.bytes);
    if (r.seconds > 0) {
      EXPECT_GT(r.seconds, 1e-6);  // at least one link latency, not a scaled-down figure
      EXPECT_LT(r.seconds, full);
    }
  }
}

TEST(Memory, ZeroStagesMatchThePaper) {
  // ZeRO Figure 1: 7.5B parameters on 64 GPUs: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB per device.
  double P = 7.5e9;
  EXPECT_NEAR(model_state_bytes(P, 0, 64) / 1e9, 120, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 1, 64) / 1e9, 31.4, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 2, 64) / 1e9, 16.6, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 3, 64) / 1e9, 1.88, 0.01);
  EXPECT_EQ(model_state_bytes(P, 3, 1), model_state_bytes(P, 0, 1));
  // Megatron's distributed-optimizer table: bf16 param, fp32 grads 18 and 6 + 12/d bytes per
  // parameter; fp32 param, fp32 grads 16 and 8 + 8/d.
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 0, 64, 4, 2), 18 * P);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 1, 64, 4, 2), 6 * P + 12 * P / 64);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 0, 64, 4, 4), 16 * P);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 1, 64, 4, 4), 8 * P + 8 * P / 64);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 3, 64, 4, 2), 16 * P / 64);  // FSDP2
}

TEST(Memory, ActivationFormulaIdentities) {
  double s = 2048, b = 1, h = 12288, a = 96;
  double sbh = s * b * h;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 1, false, Recompute::kNone),
                   sbh * (34 + 5 * a * s / h));
  // With t = 1 the tensor-parallel and sequence-parallel forms agree with the unsharded one.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 1, true, Recompute::kNone),
                   layer_activation_bytes(s, b, h, a, 1, false, Recompute::kNone));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 8, false, Recompute::kNone),
                   sbh * (10 + 24 / 8.0 + 5 * a * s / (h * 8)));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 8, true, Recompute::kNone),
                   layer_activation_bytes(s, b, h, a, 1, false, Recompute::kNone) / 8);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 8, false, Recompute::kFull), 2 * sbh);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(s, b, h, a, 8, true, Recompute::kSelective),
                   sbh * 34 / 8);
  EXPECT_FALSE(parse_recompute("partial").ok());
}

TEST(ModelFlops, MegatronFormulaAgreesWithTheGraph) {
  // Forward FLOPs of the zoo graph (counted op by op from index spaces) against Megatron's
  // closed form: equal up to the elementwise work the closed form leaves out.
  for (const char* name : {"megatron-1.7b", "megatron-18.4b"}) {
    zoo::ZooOverrides o;
    o.layers = 2;
    o.batch = 2;
    auto g = zoo::build_zoo_model(name, o);
    auto c = zoo::gpt_preset(name, o);
    ASSERT_TRUE(g.ok() && c.ok());
    double graph = graph_flops(*g), formula = gpt_model_flops(*c, 2, false, false);
    EXPECT_NEAR(graph / formula, 1.0, 0.02) << name;
    EXPECT_DOUBLE_EQ(gpt_model_flops(*c, 2, true, false) / gpt_model_flops(*c, 1, true, false), 2);
    EXPECT_GT(gpt_model_flops(*c, 2, true, true), gpt_model_flops(*c, 2, true, false));
  }
}

// The causal count: a causal kernel skips half of the scores' two contractions, 2 B s^2 h per
// layer forward; the graph's count of them (found by structure around the causal mask) agrees
// with the closed forms, and a graph without a causal mask skips nothing.
TEST(ModelFlops, CausalCountHalvesTheScoresOnly) {
  zoo::ZooOverrides o;
  o.layers = 2;
  o.batch = 2;
  auto g = zoo::build_zoo_model("megatron-1.7b", o);
  auto c = zoo::gpt_preset("megatron-1.7b", o);
  ASSERT_TRUE(g.ok() && c.ok());
  const double B = 2, s = static_cast<double>(c->seq), h = static_cast<double>(c->hidden);
  const double skipped = 2 * B * s * s * h * static_cast<double>(c->layers);
  EXPECT_NEAR(causal_skipped_flops(*g) / skipped, 1.0, 1e-9);
  EXPECT_NEAR(gpt_model_flops(*c, 2, false, false) - gpt_causal_model_flops(*c, 2, false), skipped,
              1e-6 * skipped);
  EXPECT_NEAR(gpt_model_flops(*c, 2, true, false) - gpt_causal_model_flops(*c, 2, true),
              3 * skipped, 1e-6 * skipped);
  // Recomputation is not model work in heddle's count.
  EXPECT_LT(gpt_causal_model_flops(*c, 2, true), gpt_model_flops(*c, 2, true, true));
  auto mlp = zoo::build_zoo_model("mlp", zoo::ZooOverrides{});
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(causal_skipped_flops(*mlp), 0);
}

}  // namespace
}  // namespace heddle::cost
