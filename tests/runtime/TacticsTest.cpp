// Tactics and propagation: the strategy language pins decisions, propagation completes the plan;
// the classic patterns (data parallel, Megatron MLP and attention, sequence parallel, ZeRO-3)
// come out of it, and every plan executes to the single-device result.
#include <gtest/gtest.h>

#include <random>

#include "heddle/ir/Verifier.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

TensorType f32(std::vector<int64_t> s) { return TensorType(DType::kF32, IVec(std::move(s))); }

// A pre-norm transformer block: attention (4 heads) and a GELU MLP, batch 4, sequence 8, hidden 16.
Graph block() {
  Graph g("block");
  Ops o(g);
  int64_t b = 4, s = 8, h = 16, nh = 4, hd = 4;
  ValueId x = o.input("x", f32({b, s, h}));
  ValueId ln1 = o.layernorm(x, o.param("ln1.g", f32({h})), o.param("ln1.b", f32({h})));
  auto heads = [&](ValueId t) { return o.transpose(o.reshape(t, {b, s, nh, hd}), {0, 2, 1, 3}); };
  ValueId q = heads(o.linear(ln1, o.param("wq", f32({h, h}))));
  ValueId k = heads(o.linear(ln1, o.param("wk", f32({h, h}))));
  ValueId v = heads(o.linear(ln1, o.param("wv", f32({h, h}))));
  ValueId p = o.softmax(o.scale(o.einsum("bhqd,bhkd->bhqk", q, k), 0.5));
  ValueId a = o.einsum("bhqk,bhkd->bhqd", p, v);
  ValueId merged = o.reshape(o.transpose(a, {0, 2, 1, 3}), {b, s, h});
  ValueId x2 = o.add(x, o.linear(merged, o.param("wo", f32({h, h}))));
  ValueId ln2 = o.layernorm(x2, o.param("ln2.g", f32({h})), o.param("ln2.b", f32({h})));
  ValueId up = o.gelu(o.linear(ln2, o.param("w1", f32({h, 4 * h}))));
  ValueId y = o.add(x2, o.linear(up, o.param("w2", f32({4 * h, h}))));
  o.output(y);
  EXPECT_TRUE(o.ok()) << o.status().error().to_string();
  EXPECT_TRUE(verify(g).empty());
  return g;
}

OpId producer(const Graph& g, const char* param) {
  ValueId w = *g.find_value(param);
  for (OpId i = 0; i < g.num_ops(); ++i)
    for (const auto& in : g.op(i).inputs)
      if (in.value == w) return i;
  return -1;
}

Propagation plan(const Graph& g, const char* strategy, int64_t devices) {
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok()) << spec.error().to_string();
  auto mesh = spec->mesh(devices);
  EXPECT_TRUE(mesh.ok()) << mesh.error().to_string();
  auto p = plan_from_strategy(g, *mesh, *spec);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return *p;
}

void expect_runs_like_reference(const Graph& g, const ShardingPlan& plan) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  TensorMap feeds;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids) {
      Tensor t(g.type(v));
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = u(rng);
      feeds.emplace(v, std::move(t));
    }
  auto ref_progs = lower(g, ShardingPlan::replicated(g, *Mesh::parse("1")));
  auto want = run_threaded(g, *ref_progs, feeds);
  auto progs = lower(g, plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  auto got = run_threaded(g, *progs, feeds);
  ASSERT_TRUE(got.ok() && want.ok());
  for (ValueId v : g.outputs()) {
    const Tensor &a = want->at(v), &b = got->at(v);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.f32()[i], b.f32()[i], 1e-4 * std::max(1.0f, std::fabs(a.f32()[i])));
  }
}

TEST(StrategySpec, ParsesTheVocabularyAndSaysWhatIsValid) {
  auto s = StrategySpec::parse("dp=2,tp=4,zero=1,sp=on,schedule=interleaved:2,recompute=full");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->devices(), 8);
  EXPECT_EQ(s->to_string(), "dp=2,tp=4,zero=1,schedule=interleaved:2,recompute=full,sp=on");
  EXPECT_EQ(s->mesh(8)->to_string(), "dp=2,tp=4");
  EXPECT_EQ(s->mesh(4).error().message,
            "strategy dp=2,tp=4,zero=1,schedule=interleaved:2,recompute=full,sp=on uses 8 devices "
            "(dp*tp*pp*ep) but the mesh has 4; make the degrees multiply to 4");
  EXPECT_EQ(StrategySpec::parse("dp=2,foo=3").error().message,
            "unknown strategy key 'foo'; valid keys: dp, tp, pp, ep, cp, cp_comm, cp_layout, zero, "
            "mb, microbatches, schedule, recompute, sp, layers, meshes, precision, attention, "
            "overlap, offload");
  auto techniques = StrategySpec::parse("dp=2,offload=optimizer,precision=fp8,overlap=dp+tp");
  ASSERT_TRUE(techniques.ok()) << techniques.error().to_string();
  EXPECT_EQ(techniques->to_string(), "dp=2,precision=fp8,overlap=dp+tp,offload=optimizer");
  EXPECT_EQ(StrategySpec::parse("attention=paged").error().message,
            "unknown attention 'paged'; known: flash, eager");
  auto split = StrategySpec::parse("layers=10/12/12/14,pp=4");
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  EXPECT_EQ(split->layers, (std::vector<int64_t>{10, 12, 12, 14}));
  EXPECT_EQ(split->to_string(), "pp=4,layers=10/12/12/14");
  EXPECT_FALSE(StrategySpec::parse("layers=3/0").ok());
  EXPECT_FALSE(StrategySpec::parse("zero=4").ok());
  EXPECT_FALSE(StrategySpec::parse("dp=0").ok());
  EXPECT_FALSE(StrategySpec::parse("dp=2,dp=2").ok());
  EXPECT_FALSE(StrategySpec::parse("schedule=fast").ok());
  EXPECT_TRUE(StrategySpec::parse("auto,pp=8")->auto_search);
  auto cp = StrategySpec::parse("tp=2,cp=2,dp=2");
  ASSERT_TRUE(cp.ok()) << cp.error().to_string();
  EXPECT_EQ(cp->devices(), 8);
  EXPECT_EQ(cp->to_string(), "dp=2,tp=2,cp=2");
  // Megatron-LM's order tp-cp-ep-dp-pp, fastest first: cp just outside tp.
  EXPECT_EQ(cp->mesh(8)->to_string(), "dp=2,cp=2,tp=2");
  EXPECT_EQ(cp->mesh(4).error().message,
            "strategy dp=2,tp=2,cp=2 uses 8 devices (dp*cp*tp*pp*ep) but the mesh has 4; make the "
            "degrees multiply to 4");
  EXPECT_FALSE(StrategySpec::parse("cp=0").ok());
  EXPECT_FALSE(StrategySpec::parse("cp=2,meshes=2x2/2x2").ok());
}

TEST(Tactics, DataParallelSplitsTheBatchEverywhereWithoutResharding) {
  Graph g = block();
  Propagation p = plan(g, "dp=4", 4);
  for (OpId i = 0; i < g.num_ops(); ++i)
    EXPECT_GE(p.plan.ops[i].dim(0), 0) << "op " << i << " not split on dp";
  EXPECT_TRUE(p.reshards.empty()) << p.report(g);
  expect_runs_like_reference(g, p.plan);
}

TEST(Tactics, TensorParallelFindsMegatronsColumnThenRowPairs) {
  Graph g = block();
  Propagation p = plan(g, "tp=2", 2);
  auto split_dim = [&](const char* w) {
    OpId op = producer(g, w);
    int64_t i = p.plan.ops[op].dim(0);
    return i < 0 ? std::string("-") : g.op(op).space.dim(i).name;
  };
  auto reduce_split = [&](const char* w) {
    OpId op = producer(g, w);
    int64_t i = p.plan.ops[op].dim(0);
    return i >= 0 && g.op(op).space.dim(i).is_reduce();
  };
  // Column-parallel: the projections into heads and the MLP's first layer split output features.
  for (const char* w : {"wq", "wk", "wv", "w1"}) {
    EXPECT_NE(split_dim(w), "-") << w;
    EXPECT_FALSE(reduce_split(w)) << w;
  }
  // Row-parallel: the output projection and the MLP's second layer split their contraction.
  EXPECT_TRUE(reduce_split("wo"));
  EXPECT_TRUE(reduce_split("w2"));
  // The only communication: settling the two partial sums (Megatron's two all-reduces forward).
  auto progs = lower(g, p.plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  std::string text = (*progs)[0].to_string(g, p.plan.mesh);
  size_t settles = 0;
  for (const char* c : {"all-reduce", "reduce-scatter"})
    for (size_t at = text.find(c); at != std::string::npos; at = text.find(c, at + 1)) ++settles;
  EXPECT_EQ(settles, 2u) << text;
  expect_runs_like_reference(g, p.plan);
}

TEST(Tactics, DataTimesTensorParallelAndSequenceParallelExecute) {
  Graph g = block();
  expect_runs_like_reference(g, plan(g, "dp=2,tp=2", 4).plan);
  Propagation sp = plan(g, "tp=2,sp=on", 2);
  // With sequence parallelism the layer norms split the sequence on tp.
  OpId ln = producer(g, "ln1.g");
  int64_t i = sp.plan.ops[ln].dim(0);
  ASSERT_GE(i, 0);
  EXPECT_EQ(i, 1) << "layernorm should split the sequence dim";
  expect_runs_like_reference(g, sp.plan);
}

TEST(Tactics, ZeroThreeShardsParametersAndGathersThemForUse) {
  Graph g = block();
  Propagation p = plan(g, "dp=2,zero=3", 2);
  ValueId w1 = *g.find_value("w1");
  ASSERT_TRUE(p.plan.pinned.count(w1));
  EXPECT_EQ(p.plan.pinned.at(w1).to_string(), "[Shard(0)]");
  auto progs = lower(g, p.plan);
  ASSERT_TRUE(progs.ok());
  EXPECT_NE((*progs)[0].to_string(g, p.plan.mesh).find("all-gather %w1"), std::string::npos);
  expect_runs_like_reference(g, p.plan);
}

TEST(Tactics, ContextParallelSplitsQueriesAndGathersKeysAndValues) {
  Graph g = block();
  Propagation p = plan(g, "cp=2", 2);
  // Every op splits a sequence dim (queries, or keys where they are reduced in backward).
  for (OpId i = 0; i < g.num_ops(); ++i)
    EXPECT_GE(p.plan.ops[i].dim(0), 0) << "op " << i << " not split on cp";
  // The projections split the sequence; the scores split the queries, not the keys.
  OpId wq = producer(g, "wq");
  EXPECT_NE(g.op(wq).results[0].proj.map().at(1, p.plan.ops[wq].dim(0)), 0)
      << "the query projection splits its result's sequence dim";
  for (OpId i = 0; i < g.num_ops(); ++i) {
    if (g.op(i).kind != OpKind::kEinsum || g.op(i).inputs.size() != 2 ||
        g.value(g.op(i).inputs[1].value).role == ValueRole::kParam)
      continue;
    EXPECT_EQ(g.op(i).space.dim(p.plan.ops[i].dim(0)).name, "q") << "op " << i;
  }
  // The only communication: keys and values gathered whole for each query block (Llama 3's
  // all-gather form of context parallelism).
  std::vector<std::string> gathered;
  for (const Reshard& r : p.reshards) {
    EXPECT_EQ(r.to.to_string(), "[Replicate]") << p.report(g);
    gathered.push_back(g.value(r.value).name);
  }
  EXPECT_EQ(gathered.size(), 2u) << p.report(g);
  expect_runs_like_reference(g, p.plan);
  expect_runs_like_reference(g, plan(g, "dp=2,cp=2", 4).plan);
  expect_runs_like_reference(g, plan(g, "cp=2,tp=2", 4).plan);
}

TEST(Tactics, ContextParallelNeedsASequenceItDivides) {
  Graph g = block();
  auto spec = *StrategySpec::parse("cp=3");
  auto r = plan_from_strategy(g, *spec.mesh(3), spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "cp=3 does not divide the sequence 8 of input %x f32[4, 8, 16]; divisors of 8: 1, 2, "
            "4, 8");
  Graph mlp("mlp");
  Ops o(mlp);
  o.output(o.linear(o.input("x", f32({4, 8})), o.param("w", f32({8, 8}))));
  auto two = *StrategySpec::parse("cp=2");
  auto m = plan_from_strategy(mlp, *two.mesh(2), two);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("cp=2 splits the sequence over devices, but mlp has no sequence "
                                   "dim that attention mixes"),
            std::string::npos)
      << m.error().message;
}

TEST(Tactics, BadRequestsSayWhatWouldWork) {
  Graph g = block();
  auto spec = *StrategySpec::parse("dp=3");
  auto r = plan_from_strategy(g, *spec.mesh(3), spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "dp=3 does not divide the batch 4 of input %x f32[4, 8, 16]; divisors of 4: 1, 2, 4");
}

}  // namespace
}  // namespace heddle
