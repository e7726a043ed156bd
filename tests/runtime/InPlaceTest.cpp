// Results written in place (DeviceExecutor's `in_place`): a lone elementwise call whose input tile
// nothing reads afterwards takes that tile's memory. Checked on a sum whose peak it lowers by one
// tile, and on generated training steps (random elementwise forward graphs and their gradients:
// gradient sums, activation gradients, broadcast biases, values read again later) on one device
// and split over two, fused and unfused, against the same programs run without sharing (bitwise)
// and against the ops run one by one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "common/OpByOp.h"
#include "common/RandomFeeds.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Ops.h"
#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedCommunicator.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

struct Outcome {
  TensorMap outputs;
  int64_t peak = 0;  // the largest device's arena
};

// `g` lowered for `strategy` on `devices` devices and run once on ThreadedWorld endpoints, each
// device on its own thread.
Outcome run_program(const Graph& g, const char* strategy, int64_t devices, bool fuse, bool in_place,
                    const TensorMap& feeds, int threads) {
  auto spec = StrategySpec::parse(strategy);
  auto plan = plan_from_strategy(g, *spec->mesh(devices), *spec);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  LowerOptions lo;
  lo.fuse_elementwise = fuse;
  auto programs = lower(g, plan->plan, lo);
  EXPECT_TRUE(programs.ok());
  std::vector<std::unique_ptr<DeviceExecutor>> x;
  for (const DeviceProgram& p : *programs)
    x.push_back(std::make_unique<DeviceExecutor>(g, p, true, true, in_place));
  ThreadedWorld world(devices, true);
  std::vector<Status> st(static_cast<size_t>(devices));
  std::vector<std::thread> peers;
  for (int64_t d = 1; d < devices; ++d)
    peers.emplace_back([&, d] { st[d] = x[d]->run(world.endpoint(d), feeds, {}, threads); });
  st[0] = x[0]->run(world.endpoint(0), feeds, {}, threads);
  for (auto& t : peers) t.join();
  Outcome r;
  for (int64_t d = 0; d < devices; ++d) {
    EXPECT_TRUE(st[d].ok()) << st[d].error().to_string();
    r.peak = std::max(r.peak, x[d]->peak_bytes());
  }
  x[0]->copy_outputs(r.outputs);
  return r;
}

// y = a + b over tiles a = exp(x) and b = -x that die there, then y + c with c = tanh(x): without
// sharing, four tiles are alive at the first sum (a, b, c and y); with it, y takes a's memory.
TEST(InPlace, ASumOfDyingTilesTakesOneOfTheirPlaces) {
  constexpr int64_t kRows = 16, kCols = 64;  // 4 KiB tiles
  Graph g;
  Ops ops(g);
  ValueId x = ops.input("x", f32({kRows, kCols}));
  ValueId a = ops.exp(x), b = ops.scale(x, -1.0), c = ops.tanh(x);
  ops.output(ops.add(ops.add(a, b), c));
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  TensorMap feeds = testing::random_feeds(g, 3);
  const Outcome shared = run_program(g, "dp=1", 1, false, true, feeds, 1);
  const Outcome apart = run_program(g, "dp=1", 1, false, false, feeds, 1);
  constexpr int64_t kTile = kRows * kCols * 4;
  EXPECT_EQ(apart.peak, 4 * kTile);
  EXPECT_EQ(shared.peak, 3 * kTile);
  const TensorMap ref = testing::op_by_op(g, feeds);
  for (ValueId v : g.outputs()) {
    EXPECT_TRUE(shared.outputs.at(v) == ref.at(v));
    EXPECT_TRUE(apart.outputs.at(v) == ref.at(v));
  }
}

// A random forward graph of elementwise ops over [m, n] values (inputs whose dim 0 is the batch,
// and a bias and a scale [n] broadcast over it), reduced to a scalar loss, with the gradients of
// its parameters as outputs beside the loss and a few forward values, so some tiles are read again
// long after they are made.
Graph random_train_graph(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t m = 2 * pick(1, 4), n = pick(3, 40);
  Graph fwd;
  Ops ops(fwd);
  std::vector<ValueId> pool = {ops.input("x0", f32({m, n})), ops.input("x1", f32({m, n}))};
  const ValueId bias = ops.param("bias", f32({n})), gamma = ops.param("gamma", f32({n}));
  const OpKind unary[] = {OpKind::kGelu, OpKind::kTanh,     OpKind::kSilu, OpKind::kRelu,
                          OpKind::kExp,  OpKind::kGeluTanh, OpKind::kScale};
  const OpKind binary[] = {OpKind::kAdd, OpKind::kSub, OpKind::kMul};
  const int64_t steps = pick(4, 12);
  for (int64_t s = 0; s < steps; ++s) {
    const ValueId a = pool[static_cast<size_t>(pick(0, static_cast<int64_t>(pool.size()) - 1))];
    ValueId y;
    switch (pick(0, 3)) {
      case 0:
      case 1: {
        const OpKind k = unary[pick(0, 6)];
        // exp of a value already grown by exp overflows: scale it down first.
        y = k == OpKind::kScale ? ops.scale(a, 0.5) : ops.unary(k, ops.scale(a, 0.25));
        break;
      }
      case 2: {
        const ValueId b = pool[static_cast<size_t>(pick(0, static_cast<int64_t>(pool.size()) - 1))];
        y = ops.binary(binary[pick(0, 2)], a, b);
        break;
      }
      default:
        y = pick(0, 1) ? ops.add(a, bias) : ops.mul(gamma, a);
    }
    pool.push_back(y);
  }
  ValueId total = pool.back();
  for (size_t i = 2; i + 1 < pool.size(); ++i)
    if (pick(0, 2) == 0) total = ops.add(total, pool[i]);
  const ValueId loss = ops.reduce(OpKind::kReduceSum, total, {0, 1});
  ops.output(loss);
  EXPECT_TRUE(ops.ok()) << ops.status().error().message;
  auto grads = build_gradients(fwd, loss);
  EXPECT_TRUE(grads.ok()) << grads.error().to_string();
  Graph g = std::move(grads->graph);
  for (const auto& [param, grad] : grads->grads) g.add_output(grad);
  if (pool.size() > 3) g.add_output(pool[pool.size() / 2]);
  return g;
}

TEST(InPlace, GeneratedTrainingStepsEqualTheSameProgramsWithoutSharing) {
  std::mt19937 rng(2029);
  int64_t lower_peak = 0, higher_peak = 0, runs = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Graph g = random_train_graph(rng);
    const TensorMap feeds = testing::random_feeds(g, static_cast<uint64_t>(trial));
    const TensorMap ref = testing::op_by_op(g, feeds);
    for (auto [strategy, devices] : {std::pair{"dp=1", 1}, std::pair{"dp=2", 2}}) {
      for (bool fuse : {false, true}) {
        const int threads = trial % 2 ? 2 : 1;
        SCOPED_TRACE("trial " + std::to_string(trial) + " " + strategy + (fuse ? " fused" : "") +
                     " threads " + std::to_string(threads));
        const Outcome shared = run_program(g, strategy, devices, fuse, true, feeds, threads);
        const Outcome apart = run_program(g, strategy, devices, fuse, false, feeds, threads);
        ++runs;
        lower_peak += shared.peak < apart.peak;
        higher_peak += shared.peak > apart.peak;
        for (ValueId v : g.outputs()) {
          const Tensor &s = shared.outputs.at(v), &a = apart.outputs.at(v), &e = ref.at(v);
          ASSERT_EQ(s.shape(), e.shape()) << g.value(v).name;
          EXPECT_TRUE(s == a) << g.value(v).name;  // the same program, the same bits
          for (int64_t i = 0; i < s.numel(); ++i)
            ASSERT_NEAR(s.f32()[i], e.f32()[i], 1e-4 * (1 + std::fabs(e.f32()[i])))
                << g.value(v).name << " " << i;
        }
      }
    }
  }
  // Sharing happened (a lower peak) in a fifth of the runs or more; the arena never grew from it.
  EXPECT_GE(lower_peak * 5, runs) << lower_peak << " of " << runs;
  EXPECT_EQ(higher_peak, 0);
}

}  // namespace
}  // namespace heddle
