// Causal load balancing (cp_layout=zigzag): the sequence permuted into 2cp chunks, device i of
// the cp group holding chunks i and 2cp-1-i. The layout is derived from the graph, the ring's
// block kernels are balanced at half-block granularity, and a training step computes what the
// contiguous split computes (tests/runtime/RingAttentionTest.cpp covers the ring itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/RandomFeeds.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Zigzag.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/CausalBlocks.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/SequenceLayout.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

TEST(Zigzag, PositionsAndCoordinatesAreInverse) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t chunks = 2 * (1 + static_cast<int64_t>(rng() % 8));
    const int64_t extent = chunks * (1 + static_cast<int64_t>(rng() % 5));
    std::vector<int64_t> seen(static_cast<size_t>(extent), 0);
    for (int64_t x = 0; x < extent; ++x) {
      const int64_t p = zigzag_position(x, extent, chunks);
      ASSERT_GE(p, 0);
      ASSERT_LT(p, extent);
      ++seen[static_cast<size_t>(p)];
      EXPECT_EQ(zigzag_coordinate(p, extent, chunks), x) << chunks << " chunks of " << extent;
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int64_t n) { return n == 1; }));
  }
  // 4 chunks of 2 (cp=2): device 0 holds chunks 0 and 3, device 1 chunks 1 and 2.
  std::vector<int64_t> order;
  for (int64_t x = 0; x < 8; ++x) order.push_back(zigzag_position(x, 8, 4));
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5}));
  EXPECT_EQ(zigzag_position(5, 8, 0), 5);  // in order
}

TEST(Zigzag, PermutingASequenceDimAndBack) {
  Tensor t(DType::kF32, IVec({2, 8, 3}));
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(i);
  Tensor z = permute_sequence(t, 1, 4);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t x = 0; x < 8; ++x)
      for (int64_t h = 0; h < 3; ++h)
        EXPECT_EQ(z.f32()[(b * 8 + x) * 3 + h],
                  t.f32()[(b * 8 + zigzag_position(x, 8, 4)) * 3 + h]);
  Tensor back = permute_sequence(z, 1, 4, true);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(back.f32()[i], t.f32()[i]);
}

// visible_part() against brute force over generated boxes: the box it returns holds every point
// of the box the zigzag mask leaves visible, and is the hull of the chunk pieces holding them.
TEST(Zigzag, TheVisiblePartOfABoxIsTheHullOfItsVisiblePieces) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t chunks = 2 * (1 + static_cast<int64_t>(rng() % 4));
    const int64_t size = 1 + static_cast<int64_t>(rng() % 3), S = chunks * size;
    const std::string n = std::to_string(S);
    auto g =
        parse_graph("graph m {\n  input %s: f32[1, " + n + ", " + n + "]\n  %y: f32[1, " + n +
                    ", " + n + "] = causal_mask{zigzag=" + std::to_string(chunks) +
                    "} [b=1, q=" + n + ", k=" + n + "] %s(b, q, k) -> (b, q, k)\n  output %y\n}\n");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    const Op& op = g->op(0);
    const CausalBlocks c{true, 0, 0, chunks, S};
    auto pick = [&](int64_t& a, int64_t& b) {
      a = static_cast<int64_t>(rng() % static_cast<uint64_t>(S));
      b = a + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(S - a));
    };
    int64_t qa, qb, ka, kb;
    pick(qa, qb);
    pick(ka, kb);
    const Box box(IVec({0, qa, ka}), IVec({1, qb, kb}));
    const Box got = visible_part(c, op, box);
    auto pos = [&](int64_t x) { return zigzag_position(x, S, chunks); };
    // The hull of the pieces (box cut at chunk boundaries) holding a visible point.
    int64_t q0 = S, q1 = 0, k0 = S, k1 = 0;
    for (int64_t q = qa; q < qb; ++q)
      for (int64_t k = ka; k < kb; ++k)
        if (pos(k) <= pos(q)) {
          q0 = std::min(q0, std::max(qa, q / size * size));
          q1 = std::max(q1, std::min(qb, (q / size + 1) * size));
          k0 = std::min(k0, std::max(ka, k / size * size));
          k1 = std::max(k1, std::min(kb, (k / size + 1) * size));
        }
    const std::string what = std::to_string(chunks) + " chunks of " + std::to_string(size) +
                             ", box " + box.to_string() + ": " + got.to_string();
    if (q0 >= q1) {
      EXPECT_TRUE(got.empty()) << what;
      EXPECT_TRUE(hides(c, op, box)) << what;
    } else {
      EXPECT_EQ(got, Box(IVec({0, q0, k0}), IVec({1, q1, k1}))) << what;
      EXPECT_FALSE(hides(c, op, box)) << what;
    }
  }
}

// A zoo model's training step (gradients as outputs) and its plan for `strategy`.
struct Planned {
  Graph g;
  ShardingPlan plan;
  std::vector<ParamUpdate> updates;
};

Planned train_step(const std::string& model, const zoo::ZooOverrides& over,
                   const std::string& strategy, int64_t devices) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model(model, over, mo);
  EXPECT_TRUE(fwd.ok()) << fwd.error().to_string();
  auto step = build_train_step(*fwd);
  EXPECT_TRUE(step.ok());
  for (const auto& u : step->updates) step->graph.add_output(u.grad);
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok()) << strategy;
  auto p = plan_from_strategy(step->graph, *spec->mesh(devices), *spec);
  EXPECT_TRUE(p.ok()) << strategy << ": " << p.error().to_string();
  return {std::move(step->graph), p->plan, std::move(step->updates)};
}

TEST(Zigzag, TheLayoutIsDerivedFromTheGraph) {
  Planned gpt = train_step("gpt-tiny", zoo::ZooOverrides::sized(4), "cp=2", 2);
  auto l = zigzag_layout(gpt.g, 2);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(l->chunks, 4);
  auto dims_of = [&](const std::string& name) {
    auto v = gpt.g.find_value(name);
    EXPECT_TRUE(v.has_value()) << name;
    auto it = l->dims.find(*v);
    return it == l->dims.end() ? std::vector<int64_t>{} : it->second;
  };
  EXPECT_EQ(dims_of("ids"), std::vector<int64_t>{1});
  EXPECT_EQ(dims_of("wpe"), std::vector<int64_t>{0});  // the position table: its rows
  EXPECT_TRUE(dims_of("wte").empty());                 // the token table: not the sequence
  int64_t masks = 0;
  for (OpId id : l->positional) masks += gpt.g.op(id).kind == OpKind::kCausalMask;
  EXPECT_EQ(masks, 2);                             // one per layer
  EXPECT_EQ(l->positional.size(), size_t{2 * 2});  // and its gradient
  // Llama's rotary embeddings (and their gradients) read positions too.
  zoo::ZooOverrides o = zoo::ZooOverrides::sized(2);
  Planned llama = train_step("llama-tiny", o, "cp=2", 2);
  auto ll = zigzag_layout(llama.g, 2);
  ASSERT_TRUE(ll.ok()) << ll.error().to_string();
  int64_t rotary = 0;
  for (OpId id : ll->positional)
    rotary += llama.g.op(id).kind == OpKind::kRotary || llama.g.op(id).kind == OpKind::kRotaryGrad;
  EXPECT_EQ(rotary, 2 * 2 * 2);  // q and k, forward and backward, per layer
}

TEST(Zigzag, GraphsThatDependOnTheTokensOrderAreRefused) {
  // A shifted read of the sequence (next-token labels cut from the inputs): not one to one.
  auto g = parse_graph(R"(
graph shifted {
  input %x: f32[2, 8]
  %y: f32[2, 7] = slice [b=2, s=7] %x(b, s + 1) -> (b, s)
  output %y
}
)");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  auto l = zigzag_layout(*g, 2);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("one to one"), std::string::npos) << l.error().message;
  // Two chunks per device must divide the sequence.
  Planned gpt = train_step("gpt-tiny", zoo::ZooOverrides::sized(2, {}, 12), "cp=2", 2);
  auto l3 = zigzag_layout(gpt.g, 4);  // 8 chunks of 12 tokens
  ASSERT_FALSE(l3.ok());
  EXPECT_NE(l3.error().message.find("do not divide"), std::string::npos) << l3.error().message;
}

// Per device, the ring block kernels: their count and the index points they cover.
struct RingWork {
  int64_t blocks = 0;
  int64_t points = 0;
};

RingWork ring_work(const DeviceProgram& p) {
  RingWork w;
  for (const Instr& in : p.instrs)
    if (in.kind == Instr::Kind::kKernel && in.ring >= 0)
      for (const KernelCall& c : in.calls) {
        ++w.blocks;
        w.points += c.box.volume();
      }
  return w;
}

TEST(Zigzag, EveryDeviceRunsTheSameRingWork) {
  for (int64_t cp : {2, 4}) {
    Planned ring =
        train_step("gpt-tiny", zoo::ZooOverrides::sized(4), "cp=" + std::to_string(cp), cp);
    auto layout = zigzag_layout(ring.g, cp);
    ASSERT_TRUE(layout.ok());
    const Graph laid = with_layout(ring.g, *layout);
    auto zig = lower(laid, ring.plan);
    auto contiguous = lower(ring.g, ring.plan);
    ASSERT_TRUE(zig.ok() && contiguous.ok());
    const RingWork first = ring_work((*zig)[0]);
    for (int64_t d = 0; d < cp; ++d) {
      const RingWork z = ring_work((*zig)[d]), c = ring_work((*contiguous)[d]);
      EXPECT_EQ(z.blocks, first.blocks) << "cp=" << cp << " device " << d;
      EXPECT_EQ(z.points, first.points) << "cp=" << cp << " device " << d;
      // Every ring: the device's own block whole, then half of each arriving block.
      EXPECT_EQ(z.blocks, 4 * cp) << "cp=" << cp;  // 4 rings: 2 layers x (scores, P.V)
      // The contiguous split: device i runs i+1 blocks of each ring.
      EXPECT_EQ(c.blocks, 4 * (d + 1)) << "cp=" << cp << " device " << d;
    }
    // Half-blocks: own block (1) plus cp-1 halves, of cp full blocks per ring.
    const RingWork dense = ring_work((*contiguous)[cp - 1]);
    EXPECT_EQ(first.points * 2, dense.points * (cp + 1) / cp) << "cp=" << cp;
  }
}

// Runs `p` on threads with `layout` (in order: the contiguous split) from `feeds`; the outputs in
// the sequence's order.
TensorMap run(const Planned& p, const SequenceLayout& layout, const TensorMap& feeds,
              bool skip = true) {
  LowerOptions o;
  o.skip_hidden_blocks = skip;
  const Graph laid = with_layout(p.g, layout);
  auto programs = lower(laid, p.plan, o);
  EXPECT_TRUE(programs.ok()) << programs.error().to_string();
  TensorMap in = feeds;
  permute_sequences(in, layout);
  auto out = run_threaded(laid, *programs, in);
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  TensorMap got = std::move(*out);
  permute_sequences(got, layout, true);
  return got;
}

// Generated cases: models, cp, sequence and heads drawn at random; the zigzag run's loss and
// every gradient equal the contiguous run's to rounding (the sums over tokens add in another
// order), and the zigzag run with every block computed to a few ulps.
TEST(Zigzag, TrainingStepsMatchTheContiguousSplit) {
  std::mt19937_64 rng(2026);
  const char* models[] = {"gpt-tiny", "llama-tiny"};
  for (int trial = 0; trial < 10; ++trial) {
    const std::string model = models[trial % 2];
    const int64_t cp = rng() % 2 == 0 ? 2 : 4;
    const int64_t heads = rng() % 2 == 0 ? 2 : 4;
    const int64_t seq = 2 * cp * (1 + static_cast<int64_t>(rng() % 3));
    zoo::ZooOverrides o = zoo::ZooOverrides::sized(2, 8 * heads, seq, 1);
    o.heads = heads;
    if (model == "llama-tiny") o.kv_heads = heads / 2;
    const char* other[] = {"", ",tp=2", ",dp=2"};  // with cp=2, a second axis of 2
    const std::string more = cp == 2 ? other[rng() % 3] : "";
    const std::string strategy = "cp=" + std::to_string(cp) + more;
    const std::string what =
        model + " " + strategy + " seq " + std::to_string(seq) + " heads " + std::to_string(heads);
    Planned p = train_step(model, o, strategy, more.empty() ? cp : 4);
    auto layout = zigzag_layout(p.g, cp);
    ASSERT_TRUE(layout.ok()) << what << ": " << layout.error().to_string();
    TensorMap feeds = testing::random_feeds(p.g, 11 + static_cast<uint64_t>(trial));
    for (const auto& u : p.updates)
      for (const auto& st : u.state) feeds.insert_or_assign(st.first, Tensor(p.g.type(st.first)));
    const TensorMap c = run(p, {}, feeds), z = run(p, *layout, feeds);
    const TensorMap dense = run(p, *layout, feeds, false);
    std::vector<ValueId> compared = {p.g.outputs()[0]};
    for (const auto& u : p.updates) compared.push_back(u.grad);
    for (ValueId v : compared) {
      const Tensor &x = c.at(v), &y = z.at(v), &w = dense.at(v);
      ASSERT_EQ(x.numel(), y.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        ASSERT_NEAR(x.f32()[i], y.f32()[i], 1e-4 * std::max(1.0f, std::fabs(x.f32()[i])))
            << what << " " << p.g.value(v).name << "[" << i << "]";
        // Half-block GEMMs of other shapes may round differently than the whole blocks.
        ASSERT_NEAR(y.f32()[i], w.f32()[i], 1e-6 * std::max(1.0f, std::fabs(w.f32()[i])))
            << what << " " << p.g.value(v).name << "[" << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace heddle
