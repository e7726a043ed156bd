// The simulator against the Megatron-LM table (Narayanan et al., SC'21, Table 1), closed-form
// pipeline bubbles, ZeRO memory and parameter counts, and its diagnostics.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>

#include "SimulateZoo.h"
#include "heddle/cost/ModelParts.h"
#include "heddle/cost/Simulator.h"
#include "heddle/ops/Autodiff.h"

namespace heddle::cost {
namespace {

SimulateOptions training() {
  SimulateOptions o;
  o.train = true;
  return o;
}

SimulationResult sim(const std::string& model, const std::string& cluster,
                     const std::string& strategy, int64_t batch, bool train = true,
                     bool overlap = false) {
  return simulate_zoo(model, cluster, strategy, batch, train, overlap);
}

struct Row {
  const char* model;
  int64_t layers, t, p, d, batch;
  double published;  // TFLOP/s per GPU
};

// Every row with its published configuration; the interleaved schedule uses V = 2 chunks per
// device when the layers per stage are even, else 3 (529.6B: 3 layers per stage). The 2021 runs
// predate flash attention and ran their gradient all-reduce after the pipeline flush: eager
// attention, nothing overlapped.
TEST(Megatron, TableWithinTheValidatedBounds) {
  const Row rows[] = {
      {"megatron-1.7b", 24, 1, 1, 32, 512, 137},     {"megatron-3.6b", 30, 2, 1, 32, 512, 138},
      {"megatron-7.5b", 36, 4, 1, 32, 512, 142},     {"megatron-18.4b", 40, 8, 1, 32, 1024, 135},
      {"megatron-39.1b", 48, 8, 2, 32, 1536, 138},   {"megatron-76.1b", 60, 8, 4, 32, 1792, 140},
      {"megatron-145.6b", 80, 8, 8, 24, 2304, 148},  {"megatron-310.1b", 96, 8, 16, 15, 2160, 155},
      {"megatron-529.6b", 105, 8, 35, 9, 2520, 163}, {"megatron-1t", 128, 8, 64, 6, 3072, 163},
  };
  double sum = 0, worst = 0;
  for (const Row& r : rows) {
    int64_t per = r.layers / r.p;
    std::string schedule = r.p == 1 ? "1f1b" : per % 2 == 0 ? "interleaved:2" : "interleaved:3";
    std::string strategy =
        "dp=" + std::to_string(r.d) + ",tp=" + std::to_string(r.t) + ",pp=" + std::to_string(r.p) +
        ",mb=1,recompute=full,schedule=" + schedule + ",attention=eager,overlap=none";
    SimulationResult s = sim(r.model, "a100x" + std::to_string(r.t * r.p * r.d), strategy, r.batch);
    // Megatron's Table 1 counts by its formula (full attention, recomputation included): the
    // published count, not heddle's causal one.
    double err = std::abs(s.published_tflops_per_device - r.published) / r.published;
    sum += err;
    worst = std::max(worst, err);
    EXPECT_TRUE(s.feasible) << r.model;  // Megatron ran every row on 80 GB
    EXPECT_LT(err, 0.16) << r.model << ": predicted " << s.published_tflops_per_device;
    std::printf("%-16s published %5.0f predicted %6.1f error %+5.1f%% peak %.1f GiB\n", r.model,
                r.published, s.published_tflops_per_device,
                100 * (s.published_tflops_per_device - r.published) / r.published,
                s.peak_memory_bytes / (1 << 30));
  }
  // Achieved (docs/validation.md): mean 5.9%, worst 15.5%; the issue asks for 15% / 25%, the
  // lead 6% mean. Every row is priced as bf16 training, fp32 gradient all-reduce included; the
  // 2021 runs were fp16, reducing in 16 bits, which heddle's precisions cannot say: the t = 4 and
  // t = 8 rows without pipelining, whose all-reduce is exposed, are 13-16% low.
  std::printf("mean |error| %.1f%%, worst %.1f%%\n", 100 * sum / 10, 100 * worst);
  EXPECT_LT(sum / 10, 0.06);
  EXPECT_LT(worst, 0.16);
}

TEST(Pipeline, BubblesFollowTheClosedForms) {
  // 48 layers over 4 stages: the embedding and head are small next to 12 layers per stage, so
  // the bubble is close to (p-1)/(m+p-1) for 1F1B and b/(1+b), b = (p-1)/(v m), interleaved.
  const int64_t p = 4, m = 8;
  SimulationResult f =
      sim("megatron-39.1b", "a100x32", "dp=1,tp=8,pp=4,mb=1,schedule=1f1b,recompute=full", m);
  EXPECT_NEAR(f.bubble_fraction, double(p - 1) / (m + p - 1), 0.02);
  SimulationResult g =
      sim("megatron-39.1b", "a100x32", "dp=1,tp=8,pp=4,mb=1,schedule=gpipe,recompute=full", m);
  EXPECT_NEAR(g.bubble_fraction, double(p - 1) / (m + p - 1), 0.02);
  SimulationResult i = sim("megatron-39.1b", "a100x32",
                           "dp=1,tp=8,pp=4,mb=1,schedule=interleaved:2,recompute=full", m);
  double b = double(p - 1) / (2.0 * m);
  EXPECT_NEAR(i.bubble_fraction, b / (1 + b), 0.02);
  EXPECT_LT(i.step_time_s, f.step_time_s);
  // GPipe keeps m micro-batches of activations, 1F1B at most p (stage 0 holds p of them).
  SimulationResult gk = sim("megatron-39.1b", "a100x32", "dp=1,tp=8,pp=4,mb=1,schedule=gpipe", m);
  SimulationResult fk = sim("megatron-39.1b", "a100x32", "dp=1,tp=8,pp=4,mb=1,schedule=1f1b", m);
  EXPECT_NEAR(gk.stages[0].activation_bytes / fk.stages[0].activation_bytes, double(m) / p, 0.1);
}

TEST(Memory, ZeroAndParameters) {
  // tp=2: every GPU holds half the weights (LayerNorms are replicated: slightly more).
  SimulationResult z0 = sim("megatron-1.7b", "a100x4", "dp=2,tp=2,zero=0", 8);
  SimulationResult z3 = sim("megatron-1.7b", "a100x4", "dp=2,tp=2,zero=3", 8);
  zoo::ZooOverrides none;
  double P = static_cast<double>(zoo::megatron_parameters(*zoo::gpt_preset("megatron-1.7b", none)));
  ASSERT_EQ(z0.stages.size(), 1u);
  EXPECT_NEAR(z0.stages[0].parameters * 2 / P, 1.0, 0.01);
  // bf16 training keeps fp32 gradients (Megatron's main_grad): 2 + 4 + 12 bytes per parameter
  // without ZeRO; ZeRO-3 (FSDP2's fp32 sharded weights and gradients, Adam's moments) 16 over dp.
  EXPECT_NEAR(z0.stages[0].state_bytes, 18 * z0.stages[0].parameters, 1);
  EXPECT_NEAR(z3.stages[0].state_bytes, 16 * z0.stages[0].parameters / 2, 1);
  // Megatron's distributed optimizer (bf16 param, fp32 grads): 6 + 12/d bytes per parameter.
  SimulationResult z1 = sim("megatron-1.7b", "a100x4", "dp=2,tp=2,zero=1", 8);
  EXPECT_NEAR(z1.stages[0].state_bytes, (6 + 12.0 / 2) * z1.stages[0].parameters, 1);
  // fp8 (NVIDIA's recipes reduce in bf16): 2 + 2 + 12, plus TE's fp8 weight copy.
  SimulationResult f8 = sim("llama2-7b", "h100x4", "dp=2,tp=2,zero=0,precision=fp8", 8);
  EXPECT_NEAR(f8.stages[0].state_bytes, (16 + 1) * f8.stages[0].parameters, 1);
  // Pipeline stages split the weights: the sum over stages counts the tied embedding twice.
  SimulationResult pp = sim("megatron-1.7b", "a100x8", "dp=1,tp=2,pp=4", 8);
  double total = 0;
  for (const auto& s : pp.stages) total += s.parameters * 2;
  EXPECT_GT(total, P);
  EXPECT_LT(total, P * 1.1);
}

TEST(Memory, RecomputationTradesMemory) {
  auto run = [](const char* r) {
    // Eager attention: selective recomputation drops its s x s scores (flash keeps none).
    return sim("megatron-7.5b", "a100x8",
               std::string("dp=1,tp=8,mb=1,attention=eager,recompute=") + r, 4);
  };
  SimulationResult none = run("none"), sel = run("selective"), full = run("full");
  EXPECT_LT(full.peak_memory_bytes, sel.peak_memory_bytes);
  EXPECT_LT(sel.peak_memory_bytes, none.peak_memory_bytes);
  EXPECT_GT(full.step_time_s, sel.step_time_s);
  EXPECT_GE(sel.step_time_s, none.step_time_s);
}

TEST(Simulator, ForwardOnlyAndOverlap) {
  SimulationResult fwd = sim("gpt-tiny", "h100x2", "dp=2", 4, false);
  SimulationResult train = sim("gpt-tiny", "h100x2", "dp=2", 4, true);
  EXPECT_GT(fwd.step_time_s, 0);
  EXPECT_GT(train.step_time_s, 2 * fwd.step_time_s);
  SimulationResult resnet = sim("resnet50", "v100x8", "dp=8", 64, true);
  EXPECT_GT(resnet.step_time_s, 0);
  EXPECT_GT(resnet.comm_bytes, 0);
  // Overlap hides most of the gradient reduction (slow on V100's 25 Gb/s between nodes) and the
  // stage sends; the bytes moved stay the same.
  SimulationResult plain = sim("megatron-1.7b", "v100x16", "dp=8,pp=2,overlap=none", 16);
  SimulationResult hidden = sim("megatron-1.7b", "v100x16", "dp=8,pp=2", 16, true, true);
  EXPECT_LT(hidden.step_time_s, plain.step_time_s);
  EXPECT_LT(hidden.dp_sync_s, plain.dp_sync_s / 4);
  EXPECT_EQ(hidden.comm_bytes, plain.comm_bytes);
}

// The autodiff training step, costed per layer by differencing one- and two-unit steps, equals
// the cost of the whole step graph of a deeper model costed at once; the executor's loads and
// output gathers only add time.
TEST(Simulator, AutodiffStepMatchesTheWholeGraph) {
  zoo::ZooOverrides o;
  o.batch = 4;
  o.layers = 5;
  auto src = model::zoo_scalable_model("gpt-tiny", o);
  auto c = cluster_preset("h100x2");
  auto spec = StrategySpec::parse("tp=2");
  ASSERT_TRUE(src.ok() && c.ok() && spec.ok());
  SimulateOptions opts;
  opts.train = true;
  opts.autodiff = true;
  auto pred = simulate(*src, *c, *spec, opts);
  ASSERT_TRUE(pred.ok()) << pred.error().to_string();
  opts.executor_io = true;
  auto with_io = simulate(*src, *c, *spec, opts);
  ASSERT_TRUE(with_io.ok()) << with_io.error().to_string();
  EXPECT_GT(with_io->step_time_s, pred->step_time_s);
  // The five-layer step costed whole, op group by op group.
  auto fwd = src->build_loss(5, 4);
  ASSERT_TRUE(fwd.ok());
  auto step = build_train_step(*fwd);
  ASSERT_TRUE(step.ok());
  auto mesh = spec->mesh(2);
  auto prop = stage_plan(step->graph, *mesh, *c, *spec);
  ASSERT_TRUE(prop.ok());
  std::vector<int> one_group(static_cast<size_t>(step->graph.num_ops()), 0);
  auto whole = cost_op_groups(step->graph, *mesh, *prop, *c, one_group, 1);
  ASSERT_TRUE(whole.ok());
  double expected = (*whole)[0].compute_s + (*whole)[0].comm_s;
  EXPECT_NEAR(pred->step_time_s, expected, 0.03 * expected);
  // The closed form (2x forward) is a different, coarser estimate of the same step.
  opts.autodiff = false;
  opts.executor_io = false;
  auto closed = simulate(*src, *c, *spec, opts);
  ASSERT_TRUE(closed.ok());
  EXPECT_NE(closed->step_time_s, pred->step_time_s);
}

TEST(Simulator, Diagnostics) {
  zoo::ZooOverrides o;
  o.batch = 8;
  auto src = model::zoo_scalable_model("megatron-1.7b", o);
  auto c = cluster_preset("a100x8");
  ASSERT_TRUE(src.ok() && c.ok());
  auto check = [&](const char* strategy, const char* needle) {
    auto s = StrategySpec::parse(strategy);
    ASSERT_TRUE(s.ok());
    auto r = simulate(*src, *c, *s, training());
    ASSERT_FALSE(r.ok()) << strategy;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  check("dp=2,tp=2", "8");            // 4 devices on an 8-device cluster
  check("dp=8,mb=3", "micro-batch");  // 1 sequence per replica, mb=3
  check("dp=1,tp=8,schedule=searched", "schedule");
  check("auto", "auto");
  auto r50 = model::zoo_scalable_model("resnet50", o);
  ASSERT_TRUE(r50.ok());
  auto s = StrategySpec::parse("dp=4,pp=2");
  auto r = simulate(*r50, *c, *s, training());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("layers"), std::string::npos);
}

// A GPT whose vocabulary makes the head heavy, on four pipeline stages of one V100 each.
model::ScalableModel heavy_head_gpt() {
  zoo::ZooOverrides o;
  o.layers = 8;
  o.vocab = 250000;
  o.batch = 16;
  return *model::zoo_scalable_model("gpt3-1.3b", o);
}

TEST(Simulator, UnevenLayerSplitIsHonoured) {
  auto src = heavy_head_gpt();
  auto c = cluster_preset("v100x4");
  ASSERT_TRUE(c.ok());
  auto run = [&](const std::string& strategy) {
    auto s = StrategySpec::parse(strategy);
    EXPECT_TRUE(s.ok()) << strategy;
    auto r = simulate(src, *c, *s, training());
    EXPECT_TRUE(r.ok()) << strategy << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : SimulationResult{};
  };
  SimulationResult even = run("pp=4,mb=1"), given = run("pp=4,mb=1,layers=2/2/2/2"),
                   split = run("pp=4,mb=1,layers=1/3/3/1");
  // The even split spelled out is the default.
  EXPECT_EQ(given.step_time_s, even.step_time_s);
  ASSERT_EQ(split.stages.size(), 4u);
  const int64_t want[] = {1, 3, 3, 1};
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_EQ(split.stages[d].layers, want[d]) << d;
    EXPECT_EQ(split.chunk_units[d], want[d]) << d;
    // The fixed part of a chunk does not depend on the split.
    EXPECT_DOUBLE_EQ(split.chunk_fixed_s[d], even.chunk_fixed_s[d]) << d;
  }
  // The end stages lose a layer's work each, the middle ones gain one; parameters follow.
  EXPECT_LT(split.stages[0].busy_s, even.stages[0].busy_s);
  EXPECT_LT(split.stages[3].busy_s, even.stages[3].busy_s);
  EXPECT_GT(split.stages[1].busy_s, even.stages[1].busy_s);
  EXPECT_GT(split.stages[1].parameters, even.stages[1].parameters);
  EXPECT_LT(split.stages[0].parameters, even.stages[0].parameters);
  // The head stage is the bottleneck here, so unloading it shortens the step.
  EXPECT_LT(split.step_time_s, even.step_time_s);
  // The canonical string carries the split and re-simulates to the same step.
  EXPECT_NE(split.strategy.find("layers=1/3/3/1"), std::string::npos) << split.strategy;
  EXPECT_EQ(run(split.strategy).step_time_s, split.step_time_s);
  // Interleaving: one entry per chunk (pp x V).
  SimulationResult il = run("pp=4,mb=1,schedule=interleaved:2,layers=1/1/1/1/1/1/1/1");
  EXPECT_EQ(il.step_time_s, run("pp=4,mb=1,schedule=interleaved:2").step_time_s);
}

TEST(Simulator, LayerSplitDiagnostics) {
  auto src = heavy_head_gpt();
  auto c = cluster_preset("v100x4");
  ASSERT_TRUE(c.ok());
  for (auto [strategy, needle] :
       {std::pair<const char*, const char*>{"pp=4,layers=2/3/3", "one layer count per chunk"},
        {"pp=4,layers=2/3/3/1", "sum to the model's layers"},
        {"pp=4,schedule=interleaved:2,layers=1/3/3/1", "8 chunks"},
        {"pp=2,dp=2,layers=2/2/2/2", "one layer count per chunk"}}) {
    auto s = StrategySpec::parse(strategy);
    ASSERT_TRUE(s.ok()) << strategy;
    auto r = simulate(src, *c, *s, training());
    ASSERT_FALSE(r.ok()) << strategy;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }
  for (const char* bad : {"pp=4,layers=0/4/2/2", "pp=4,layers=2//3", "pp=4,layers=", "layers=x"}) {
    auto s = StrategySpec::parse(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find(">= 1"), std::string::npos) << s.error().message;
  }
  // A model without repeating layers has nothing to split.
  zoo::ZooOverrides o;
  o.batch = 8;
  auto r50 = model::zoo_scalable_model("resnet50", o);
  ASSERT_TRUE(r50.ok());
  auto r = simulate(*r50, *c, *StrategySpec::parse("dp=4,layers=3"), training());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("has none"), std::string::npos) << r.error().message;
  // MoE layers come in units of two.
  auto moe = model::zoo_scalable_model("moe-tiny", o);
  ASSERT_TRUE(moe.ok());
  ASSERT_EQ(moe->unit, 2);
  std::string odd = "dp=2,pp=2,layers=1/" + std::to_string(moe->layers - 1);
  auto m = simulate(*moe, *c, *StrategySpec::parse(odd), training());
  ASSERT_FALSE(m.ok()) << odd;
  EXPECT_NE(m.error().message.find("2-layer repeating unit"), std::string::npos)
      << m.error().message;
}

TEST(Simulator, Deterministic) {
  zoo::ZooOverrides o;
  o.batch = 16;
  auto src = model::zoo_scalable_model("megatron-3.6b", o);
  auto c = cluster_preset("a100x16");
  auto s = StrategySpec::parse("dp=2,tp=2,pp=4,schedule=interleaved:2,recompute=full");
  SimulateOptions opts = training();
  opts.trace = true;
  auto a = simulate(*src, *c, *s, opts), b = simulate(*src, *c, *s, opts);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->trace_json, b->trace_json);
  EXPECT_EQ(a->step_time_s, b->step_time_s);
  EXPECT_EQ(a->strategy, "dp=2,tp=2,pp=4,zero=0,mb=1,schedule=interleaved:2,recompute=full");
  // The canonical strategy reproduces the result.
  auto again = simulate(*src, *c, *StrategySpec::parse(a->strategy), opts);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->step_time_s, a->step_time_s);
}

// Per-stage sub-meshes that are all equal are the plain strategy: the same figures, strategy
// string and trace, byte for byte.
TEST(SubMeshes, EqualStagesGiveThePlainResult) {
  zoo::ZooOverrides over;
  over.layers = 6;
  over.batch = 16;
  auto src = *model::zoo_scalable_model("gpt3-1.3b", over);
  auto c = *resolve_cluster("a100x16");
  SimulateOptions o = training();
  o.trace = true;
  for (auto [plain, meshes] :
       {std::pair<const char*, const char*>{"dp=2,tp=4,pp=2,mb=2,zero=1",
                                            "meshes=2x4/2x4,mb=2,zero=1"},
        {"dp=4,tp=1,pp=4,schedule=zb-h1,recompute=selective",
         "pp=4,meshes=4x1/4x1/4x1/4x1,schedule=zb-h1,recompute=selective"}}) {
    auto a = simulate(src, c, *StrategySpec::parse(plain), o);
    auto b = simulate(src, c, *StrategySpec::parse(meshes), o);
    ASSERT_TRUE(a.ok() && b.ok()) << plain;
    EXPECT_FALSE(b->heterogeneous);
    EXPECT_EQ(a->strategy, b->strategy);
    EXPECT_EQ(a->step_time_s, b->step_time_s);
    EXPECT_EQ(a->peak_memory_bytes, b->peak_memory_bytes);
    EXPECT_EQ(a->energy_j, b->energy_j);
    EXPECT_EQ(a->comm_bytes, b->comm_bytes);
    EXPECT_EQ(a->link_bytes, b->link_bytes);
    EXPECT_EQ(a->trace_json, b->trace_json);
    ASSERT_EQ(a->stages.size(), b->stages.size());
    for (size_t i = 0; i < a->stages.size(); ++i) {
      EXPECT_EQ(a->stages[i].busy_s, b->stages[i].busy_s);
      EXPECT_EQ(a->stages[i].peak_memory_bytes, b->stages[i].peak_memory_bytes);
    }
  }
}

// Stages of 2 and 4 replicas: each stage's compute, state and activations are those of the
// homogeneous pipeline with its own replica count and micro-batch, and the 2 -> 4 send moves the
// sender's whole tile (each of its devices feeds two receivers).
TEST(SubMeshes, EachStageIsPricedOnItsOwnMesh) {
  zoo::ZooOverrides over;
  over.layers = 4;
  over.batch = 32;
  auto src = *model::zoo_scalable_model("gpt3-1.3b", over);
  auto c6 = *resolve_cluster("a100x6"), c4 = *resolve_cluster("a100x4"),
       c8 = *resolve_cluster("a100x8");
  std::map<bool, std::array<SimulationResult, 3>> runs;  // overlap -> hetero, dp=2, dp=4
  for (bool overlap : {true, false}) {
    SimulateOptions o = training();
    o.overlap = overlap;
    const std::string ov = overlap ? ",overlap=dp" : ",overlap=none";
    auto h = simulate(src, c6,
                      *StrategySpec::parse("pp=2,meshes=2x1/4x1,microbatches=4,zero=1" + ov), o);
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    EXPECT_TRUE(h->heterogeneous);
    EXPECT_EQ(h->strategy,
              "pp=2,meshes=2x1/4x1,zero=1,microbatches=4,schedule=1f1b,recompute=none" + ov);
    // Micro-batches of 8 sequences: 4 per replica on stage 0, 2 on stage 1.
    auto a = simulate(src, c4, *StrategySpec::parse("dp=2,pp=2,mb=4,zero=1" + ov), o);
    auto b = simulate(src, c8, *StrategySpec::parse("dp=4,pp=2,mb=2,zero=1" + ov), o);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(h->stages.size(), 2u);
    EXPECT_EQ(h->stages[0].dp, 2);
    EXPECT_EQ(h->stages[1].dp, 4);
    EXPECT_EQ(h->stages[0].micro_batch, 4);
    EXPECT_EQ(h->stages[1].micro_batch, 2);
    EXPECT_EQ(h->stages[0].devices + h->stages[1].devices, 6);
    EXPECT_EQ(h->stages[0].state_bytes, a->stages[0].state_bytes);
    EXPECT_EQ(h->stages[1].state_bytes, b->stages[1].state_bytes);
    EXPECT_EQ(h->stages[0].parameters, a->stages[0].parameters);
    EXPECT_EQ(h->stages[1].parameters, b->stages[1].parameters);
    EXPECT_DOUBLE_EQ(h->chunk_unit_s[0], a->chunk_unit_s[0]);
    EXPECT_DOUBLE_EQ(h->chunk_unit_s[1], b->chunk_unit_s[1]);
    EXPECT_DOUBLE_EQ(h->stages[0].activation_bytes, a->stages[0].activation_bytes);
    EXPECT_DOUBLE_EQ(h->stages[1].activation_bytes, b->stages[1].activation_bytes);
    runs[overlap] = {*h, *a, *b};
  }
  // Without overlap the chunks carry their sends. With stage 0's tile twice stage 1's: stage 0
  // sends its own tile forward (as the dp=2 pipeline does); stage 1 sends back, per device, its
  // tile x 4/2, stage 0's tile, where the dp=4 pipeline sends its own.
  auto send = [&](int k, size_t c) {
    return runs[false][k].chunk_fixed_s[c] - runs[true][k].chunk_fixed_s[c];
  };
  EXPECT_GT(send(1, 0), 0);
  EXPECT_NEAR(send(0, 0), send(1, 0), 1e-12);
  EXPECT_NEAR(send(0, 1), send(1, 1), 1e-12);  // the dp=2 pipeline's backward send: its tile
  EXPECT_GT(send(0, 1), send(2, 1));
  // Bad micro-batch counts and device sums say what is valid.
  auto bad = [&](const char* strategy, const Cluster& c) {
    auto r = simulate(src, c, *StrategySpec::parse(strategy), training());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(bad("pp=2,meshes=2x1/4x1,microbatches=16", c6).find("use a count dividing 8"),
            std::string::npos);
  EXPECT_NE(bad("pp=2,meshes=2x1/4x1,mb=2", c6).find("give microbatches=M"), std::string::npos);
  EXPECT_NE(bad("pp=2,meshes=2x1/4x1", c8).find("make the sub-meshes add up to 8"),
            std::string::npos);
  EXPECT_NE(bad("pp=2,meshes=3x1/3x1", c6).find("not divisible by dp=3"), std::string::npos);
}

}  // namespace
}  // namespace heddle::cost
