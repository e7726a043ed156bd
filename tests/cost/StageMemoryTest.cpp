// Per-stage memory from the real schedule: activations held by the micro-batch chunks in flight
// as each pipeline schedule orders them (counted here by hand), the logits the loss keeps on the
// last stage, gradient buffers under ZeRO and the allocator allowance.
#include <gtest/gtest.h>

#include <string>

#include "heddle/cost/Simulator.h"

namespace heddle::cost {
namespace {

// gpt-tiny (hidden 64, seq 32) cut to 8 layers, batch 8, on four A100s, training.
SimulationResult tiny(const std::string& strategy, int64_t vocab = 128) {
  zoo::ZooOverrides o = zoo::ZooOverrides::sized(8, {}, {}, 8);
  o.vocab = vocab;
  auto src = model::zoo_scalable_model("gpt-tiny", o);
  auto c = resolve_cluster("a100x4");
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(src.ok() && c.ok() && spec.ok()) << strategy;
  SimulateOptions opts;
  opts.train = true;
  auto r = simulate(*src, *c, *spec, opts);
  EXPECT_TRUE(r.ok()) << strategy << ": " << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : SimulationResult{};
}

// With full recomputation a layer keeps only its input, the residual stream: b x s x h bf16.
constexpr double kLayerKept = 1 * 32 * 64 * 2;

TEST(StageMemory, InFlightChunksFromEachSchedule) {
  // 1F1B on 4 stages, 2 layers each: stage s holds 4 - s micro-batches (its p - s - 1 warm-up
  // forwards and the one before its first backward).
  auto f = tiny("pp=4,mb=1,recompute=full,schedule=1f1b");
  ASSERT_EQ(f.stages.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(f.stages[s].in_flight, 4 - s) << "stage " << s;
  // The middle stages hold no embedding and no head: their activations differ by what the
  // schedule keeps, (3 - 2) micro-batches x 2 layers.
  EXPECT_DOUBLE_EQ(f.stages[1].activation_bytes - f.stages[2].activation_bytes,
                   (3 - 2) * 2 * kLayerKept);

  // Interleaved with 2 chunks of 1 layer: Megatron's warm-up count (p - s - 1) * 2 + (v - 1) * p,
  // plus one, chunks in flight.
  auto v = tiny("pp=4,mb=1,recompute=full,schedule=interleaved:2");
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(v.stages[s].in_flight, (4 - s - 1) * 2 + (2 - 1) * 4 + 1) << "stage " << s;
  EXPECT_DOUBLE_EQ(v.stages[1].activation_bytes - v.stages[2].activation_bytes,
                   (9 - 7) * 1 * kLayerKept);
  // Interleaving holds more than 1F1B on every stage but the first (11 x 1 layer vs 4 x 2).
  EXPECT_GT(v.stages[1].activation_bytes, f.stages[1].activation_bytes);

  // ZB-H1: the weight-gradient block that frees a micro-batch runs s backwards late on stage s,
  // so every stage holds 4 micro-batches: the middle stages hold the same.
  auto z = tiny("pp=4,mb=1,recompute=full,schedule=zb-h1");
  for (int s = 0; s < 4; ++s) EXPECT_EQ(z.stages[s].in_flight, 4) << "stage " << s;
  EXPECT_DOUBLE_EQ(z.stages[1].activation_bytes, z.stages[2].activation_bytes);
  EXPECT_DOUBLE_EQ(z.stages[2].activation_bytes - f.stages[2].activation_bytes,
                   (4 - 2) * 2 * kLayerKept);
  // The plan's memory is its worst stage's.
  for (const auto* r : {&f, &v, &z}) {
    double worst = 0;
    for (const auto& st : r->stages) worst = std::max(worst, st.peak_memory_bytes);
    EXPECT_EQ(r->peak_memory_bytes, worst);
  }
}

TEST(StageMemory, TheLastStagePaysTheLogits) {
  // A larger vocabulary adds to the last stage only: the loss keeps its fp32 softmax of the
  // logits (4 bytes each) for the one micro-batch in flight there, and the bf16 logits (2 bytes)
  // are the working set while it runs. Logits: b x s x V.
  auto small = tiny("pp=4,mb=1,schedule=1f1b", 128);
  auto large = tiny("pp=4,mb=1,schedule=1f1b", 4096);
  const double logits = 1.0 * 32 * (4096 - 128);
  EXPECT_DOUBLE_EQ(large.stages[3].activation_bytes - small.stages[3].activation_bytes,
                   (4 + 2) * logits);
  for (int s = 0; s < 3; ++s)
    EXPECT_DOUBLE_EQ(large.stages[s].activation_bytes, small.stages[s].activation_bytes) << s;
}

TEST(StageMemory, BuffersAndAllocatorAllowance) {
  // ZeRO 0 and 1 keep no buffer beyond the gradients; ZeRO-2 two gradient buckets (the whole
  // gradient when smaller than Megatron's 40M-parameter bucket); ZeRO-3 two gathered layers and
  // one layer's gradient.
  auto z1 = tiny("dp=4,mb=1,zero=1");
  auto z2 = tiny("dp=4,mb=1,zero=2");
  auto z3 = tiny("dp=4,mb=1,zero=3");
  EXPECT_EQ(z1.stages[0].buffer_bytes, 0);
  // The buckets hold fp32 gradients (Megatron's main_grad in bf16 training).
  EXPECT_DOUBLE_EQ(z2.stages[0].buffer_bytes, 2 * z2.stages[0].parameters * 4);
  EXPECT_GT(z3.stages[0].buffer_bytes, 0);
  EXPECT_LT(z3.stages[0].buffer_bytes, z2.stages[0].buffer_bytes);
  // The allowance: the device's runtime memory plus its fragmentation share of what the
  // allocator recycles (activations and buffers), and the peak adds up.
  const DeviceProfile& a100 = *find_device("a100");
  for (const auto* r : {&z1, &z2, &z3}) {
    const StageResult& st = r->stages[0];
    EXPECT_DOUBLE_EQ(
        st.allocator_bytes,
        a100.runtime_bytes + a100.fragmentation * (st.activation_bytes + st.buffer_bytes));
    EXPECT_DOUBLE_EQ(st.peak_memory_bytes,
                     st.state_bytes + st.buffer_bytes + st.activation_bytes + st.allocator_bytes);
  }
  EXPECT_EQ(a100.runtime_bytes, 2e9);
  EXPECT_EQ(a100.fragmentation, 0.05);
}

// `plan --memory-reserve` sets the allowance's fixed part on every device (export/PlanTarget.h):
// each stage's peak moves by the difference, the fragmentation share and the device's memory
// stay, so the reserve is counted once, not on top of the runtime part.
TEST(StageMemory, TheReserveReplacesTheRuntimePart) {
  zoo::ZooOverrides o = zoo::ZooOverrides::sized(8, {}, {}, 8);
  auto src = model::zoo_scalable_model("gpt-tiny", o);
  auto c = resolve_cluster("a100x4");
  ASSERT_TRUE(src.ok() && c.ok());
  Cluster reserved = *c;
  reserved.for_each_device([](DeviceProfile& d) { d.runtime_bytes = 6e9; });
  SimulateOptions opts;
  opts.train = true;
  auto spec = StrategySpec::parse("pp=2,dp=2,mb=1");
  auto base = simulate(*src, *c, *spec, opts);
  auto more = simulate(*src, reserved, *spec, opts);
  ASSERT_TRUE(base.ok() && more.ok());
  ASSERT_EQ(base->stages.size(), 2u);
  for (size_t st = 0; st < 2; ++st) {
    EXPECT_DOUBLE_EQ(more->stages[st].allocator_bytes - base->stages[st].allocator_bytes, 4e9);
    EXPECT_DOUBLE_EQ(more->stages[st].peak_memory_bytes - base->stages[st].peak_memory_bytes, 4e9);
  }
  EXPECT_EQ(more->memory_limit_bytes, base->memory_limit_bytes);
  EXPECT_EQ(base->memory_limit_bytes, 80e9);
}

}  // namespace
}  // namespace heddle::cost
