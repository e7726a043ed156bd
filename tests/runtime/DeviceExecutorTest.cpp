// The persistent executor: arena planning, the kernels' write-everything contract it relies on,
// tensors that view memory, runners reused across steps against fresh one-shot runs, and
// data-parallel updates computed once per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "common/OpByOp.h"
#include "common/RandomFeeds.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/ArenaPlan.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/HostCores.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/OutputKernels.h"
#include "heddle/runtime/ThreadedCommunicator.h"
#include "heddle/runtime/ThreadedRunner.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

TEST(ArenaPlan, BuffersAliveTogetherNeverOverlapAndDeadOnesAreReused) {
  std::mt19937_64 rng(7);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<ArenaRequest> req;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int64_t a = static_cast<int64_t>(rng() % 50), b = a + static_cast<int64_t>(rng() % 10);
      req.push_back({a, b, static_cast<int64_t>(rng() % 5000)});
    }
    ArenaLayout l = plan_arena(req);
    int64_t peak = 0;
    for (int64_t t = 0; t < 60; ++t) {
      int64_t live = 0;
      for (const auto& r : req)
        if (r.first <= t && t <= r.last) live += (r.bytes + 63) / 64 * 64;
      peak = std::max(peak, live);
    }
    EXPECT_GE(l.bytes, peak);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(l.offsets[i] % 64, 0);
      EXPECT_LE(l.offsets[i] + req[i].bytes, l.bytes);
      for (int j = 0; j < i; ++j) {
        bool together = req[i].first <= req[j].last && req[j].first <= req[i].last;
        bool disjoint = l.offsets[i] + req[i].bytes <= l.offsets[j] ||
                        l.offsets[j] + req[j].bytes <= l.offsets[i];
        if (together && req[i].bytes && req[j].bytes) {
          EXPECT_TRUE(disjoint) << i << " " << j;
        }
      }
    }
  }
  // A chain: each buffer dies where the next is born + 1; two slots suffice.
  std::vector<ArenaRequest> chain;
  for (int64_t i = 0; i < 10; ++i) chain.push_back({i, i + 1, 100});
  EXPECT_EQ(plan_arena(chain).bytes, 2 * 128);
}

// The arena is reused without zeroing, so every kernel must write every element of its output
// tiles whatever they held: run each op of several training graphs over its whole index space
// into zeroed and into NaN-poisoned outputs, and compare bitwise.
TEST(DeviceExecutor, KernelsWriteTheirWholeOutputs) {
  int64_t ops = 0;
  for (const char* name : {"gpt-tiny", "llama-tiny", "resnet-tiny", "vit-tiny", "moe-tiny"}) {
    zoo::ModelOptions mo;
    mo.with_loss = true;
    auto fwd = zoo::build_zoo_model(name, zoo::ZooOverrides::sized(2), mo);
    ASSERT_TRUE(fwd.ok()) << name;
    auto step = build_train_step(*fwd);
    ASSERT_TRUE(step.ok()) << name;
    const Graph& g = step->graph;
    TensorMap vals = testing::random_feeds(g, 3);
    for (const Op& op : g.ops()) {
      std::vector<const Tensor*> ins;
      for (const auto& x : op.inputs) ins.push_back(&vals.at(x.value));
      std::vector<Tensor> zero, poison;
      for (const auto& r : op.results) {
        zero.emplace_back(g.type(r.value));
        poison.emplace_back(g.type(r.value));
        poison.back().fill(NAN);
      }
      std::vector<Tensor*> pz, pp;
      for (auto& t : zero) pz.push_back(&t);
      for (auto& t : poison) pp.push_back(&t);
      for (bool direct : {false, true}) {
        kernels::KernelOptions ko;
        ko.direct_conv = direct;
        ASSERT_TRUE(kernels::run(op, op.space.box(), ins, pz, ko).ok());
        ASSERT_TRUE(kernels::run(op, op.space.box(), ins, pp, ko).ok());
        for (size_t k = 0; k < zero.size(); ++k)
          EXPECT_TRUE(zero[k] == poison[k])
              << name << ": " << op_kind_name(op.kind) << " result " << k << " direct " << direct;
      }
      for (size_t k = 0; k < zero.size(); ++k)
        vals.insert_or_assign(op.results[k].value, std::move(zero[k]));
      ++ops;
    }
  }
  EXPECT_GT(ops, 500);
}

TEST(Tensor, ViewsShareMemoryAndCopiesOfThemOwnIt) {
  std::vector<float> mem = {1, 2, 3, 4, 5, 6};
  Tensor v = Tensor::view(DType::kF32, Box(IVec{1, 0}, IVec{3, 3}), mem.data());
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.at(IVec{2, 1}), 5);
  v.set(IVec{1, 0}, 9);
  EXPECT_EQ(mem[0], 9);
  Tensor c = v;  // deep
  EXPECT_FALSE(c.is_view());
  EXPECT_TRUE(c == v);
  c.set(IVec{1, 0}, 7);
  EXPECT_EQ(mem[0], 9);
  EXPECT_FALSE(c == v);
  Tensor m = std::move(v);  // moves the view
  EXPECT_TRUE(m.is_view());
  EXPECT_EQ(m.f32(), mem.data());
  Tensor owning = Tensor::tile(DType::kF32, m.region());
  owning.copy_from(m);
  EXPECT_TRUE(owning == m);
  const float* before = owning.f32();
  owning = c;  // same size: storage reused
  EXPECT_EQ(owning.f32(), before);
  EXPECT_TRUE(owning == c);
  m = owning;  // assigning to a view replaces it with an owning copy, the memory is untouched
  EXPECT_FALSE(m.is_view());
  EXPECT_EQ(mem[0], 9);
}

// Owning tensors' float storage starts on a 64-byte boundary, however they were made (AdamW's
// streaming stores need its three results alike modulo 32 bytes).
TEST(Tensor, OwnedFloatStorageIsCacheLineAligned) {
  auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.f32()) % 64 == 0; };
  std::vector<Tensor> ts;
  for (int64_t n : {1, 3, 5, 17, 1000, 4099}) ts.emplace_back(DType::kF32, IVec{n});
  for (const Tensor& t : ts) EXPECT_TRUE(aligned(t)) << t.to_string();
  std::vector<float> mem(13, 1.0f);
  Tensor v = Tensor::view(DType::kF32, Box(IVec{0}, IVec{12}), mem.data() + 1);
  Tensor copy = v;
  EXPECT_TRUE(aligned(copy));
  Tensor assigned = ts[0];
  assigned = v;  // grows: new storage
  EXPECT_TRUE(aligned(assigned));
  EXPECT_TRUE(aligned(v.crop(Box(IVec{3}, IVec{10}))));
}

// add's gradient passes dy through: the executor gives it dy's tile instead of a copy kernel,
// also when the gradient is a graph output and dy lives on after it. The results equal the ops
// run one by one. (Autodiff now hands dy itself on as an add's gradient; the elementwise_grad
// of add that a graph may still name is appended here by hand, reading x's gradient as dy.)
TEST(DeviceExecutor, PassThroughGradientsShareTheirInputsTile) {
  Graph fwd;
  Ops ops(fwd);
  ValueId x = ops.param("x", f32({4, 8})), b = ops.param("b", f32({8}));
  ValueId y = ops.add(x, b);
  ValueId loss = ops.reduce(OpKind::kReduceSum, ops.mul(y, ops.gelu(y)), {0, 1});
  ops.output(loss);
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  auto grads = build_gradients(fwd, loss);
  ASSERT_TRUE(grads.ok()) << grads.error().to_string();
  Graph& g = grads->graph;
  {
    Op eg = g.op(g.value(y).producer);  // add [d0, d1]: x(d0, d1), b(d1) -> (d0, d1)
    eg.kind = OpKind::kElementwiseGrad;
    eg.attrs = {{"fn", std::string("add")}, {"wrt", int64_t{0}}, {"alpha", 1.0}};
    ValueId dx = grads->grads[0].first == x ? grads->grads[0].second : grads->grads[1].second;
    eg.inputs.insert(eg.inputs.begin(), Operand{dx, eg.results[0].proj});
    eg.results[0].value = -1;
    Ops more(g);
    ASSERT_EQ(more.emit(eg, {f32({4, 8})}).size(), 1u);
  }
  int64_t pass = 0;
  for (const Op& op : g.ops()) {
    bool add_grad = op.kind == OpKind::kElementwiseGrad && !op.space.has_reduce() &&
                    std::get<std::string>(op.attrs.at("fn")) == "add";
    pass += add_grad;
    if (add_grad) g.add_output(op.results[0].value);
  }
  ASSERT_EQ(pass, 1);
  for (const auto& [param, grad] : grads->grads) g.add_output(grad);
  auto spec = StrategySpec::parse("dp=1");
  auto plan = plan_from_strategy(g, *spec->mesh(1), *spec);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  auto programs = lower(g, plan->plan);
  ASSERT_TRUE(programs.ok());
  TensorMap feeds = testing::random_feeds(g, 5);
  auto got = run_threaded(g, *programs, feeds, {});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  TensorMap vals = testing::op_by_op(g, feeds);
  for (ValueId v : g.outputs()) {
    const Tensor &a = got->at(v), &e = vals.at(v);
    ASSERT_EQ(a.shape(), e.shape()) << g.value(v).name;
    for (int64_t i = 0; i < a.numel(); ++i)
      EXPECT_NEAR(a.f32()[i], e.f32()[i], 1e-5 * (1 + std::fabs(e.f32()[i]))) << g.value(v).name;
  }
}

// A reshape that only regroups dims of a row-major tile ([b, s, h*d] into [b, s, h, d] and back)
// is a view of its input's tile, which must then live as long as the view: the results equal
// the ops run one by one, bitwise, on one device and on tiles split over two, also when a view is
// a graph output, a view's consumer is viewed again, and a view is read after the last direct use
// of its input.
TEST(DeviceExecutor, ReshapesThatMoveNothingViewTheirInputsTile) {
  Graph g;
  Ops ops(g);
  ValueId x = ops.input("x", f32({4, 6, 8})), w = ops.input("w", f32({4, 6, 2, 4}));
  ValueId y = ops.gelu(ops.mul(x, x));
  ValueId r = ops.reshape(y, {4, 6, 2, 4});  // moves nothing: a view
  ValueId z = ops.mul(r, w);
  ValueId back = ops.reshape(z, {4, 6, 8});  // a view of a view's consumer
  ValueId flat = ops.reshape(ops.add(back, x), {24, 8});
  ops.output(r);
  ops.output(ops.add(ops.reshape(flat, {4, 48}), ops.reshape(y, {4, 48})));
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  TensorMap feeds = testing::random_feeds(g, 11);
  TensorMap vals = testing::op_by_op(g, feeds);
  for (auto [strategy, n] : {std::pair{"dp=1", 1}, std::pair{"dp=2", 2}}) {
    auto spec = StrategySpec::parse(strategy);
    auto plan = plan_from_strategy(g, *spec->mesh(n), *spec);
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    auto programs = lower(g, plan->plan);
    ASSERT_TRUE(programs.ok());
    auto got = run_threaded(g, *programs, feeds, {});
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    for (ValueId v : g.outputs()) {
      const Tensor &a = got->at(v), &e = vals.at(v);
      ASSERT_EQ(a.shape(), e.shape()) << g.value(v).name;
      for (int64_t i = 0; i < a.numel(); ++i)
        EXPECT_EQ(a.f32()[i], e.f32()[i]) << strategy << " " << g.value(v).name << " " << i;
    }
  }
}

struct Lowered {
  Graph g;
  std::vector<ParamUpdate> updates;
  std::vector<DeviceProgram> programs;
};

Lowered lowered_train_step(const char* model, const char* strategy, int64_t devices) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model(model, zoo::ZooOverrides::sized(4), mo);
  EXPECT_TRUE(fwd.ok());
  auto step = build_train_step(*fwd);
  EXPECT_TRUE(step.ok());
  Lowered l{std::move(step->graph), std::move(step->updates), {}};
  auto spec = StrategySpec::parse(strategy);
  auto plan = plan_from_strategy(l.g, *spec->mesh(devices), *spec);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  l.programs = std::move(*lower(l.g, plan->plan));
  return l;
}

// A ZeRO-1 step slices each replicated parameter and gradient to the device's shard. A slice of the
// device's own tile meets no peer (a parameter's becomes a view of its feed), so the executor's
// meetings hold only the collectives that move data. (AssembledOutputs.ZeroOne... checks the
// step against the reference.)
TEST(DeviceExecutor, SlicesOfItsOwnTileMeetNoPeer) {
  Lowered l = lowered_train_step("gpt-tiny", "dp=2,zero=1", 2);
  for (const DeviceProgram& p : l.programs) {
    int64_t slices = 0, others = 0;
    for (const Instr& in : p.instrs)
      if (in.kind == Instr::Kind::kCollective)
        ++(in.collective == Collective::kSlice ? slices : others);
    EXPECT_GT(slices, 30) << "device " << p.device;
    DeviceExecutor x(l.g, p, true, true);
    int64_t met = 0;
    for (int64_t k : x.collective_batches()) met += k;
    EXPECT_EQ(met, others) << "device " << p.device;
  }
}

// A runner kept across training steps (arena reused, feeds viewed) gives bit-identical results to
// fresh one-shot runs of every step.
TEST(ThreadedRunner, StepsOfAKeptRunnerEqualFreshRuns) {
  for (auto [model, strategy, n] : {std::tuple{"gpt-tiny", "dp=2", 2},
                                    {"gpt-tiny", "tp=2", 2},
                                    {"resnet-tiny", "dp=2", 2},
                                    {"llama-tiny", "dp=1", 1}}) {
    Lowered l = lowered_train_step(model, strategy, n);
    TensorMap a = testing::random_feeds(l.g, 9), b = a;
    ThreadedRunner runner(l.g, l.programs);
    for (int step = 1; step <= 3; ++step) {
      ExecOptions o{.optimizer_step = step};
      auto kept = runner.run(a, o);
      auto fresh = run_threaded(l.g, l.programs, b, o);
      ASSERT_TRUE(kept.ok() && fresh.ok()) << model << " " << strategy;
      for (ValueId v : l.g.outputs())
        ASSERT_TRUE(kept->at(v) == fresh->at(v)) << model << " " << strategy << " step " << step;
      for (const auto& u : l.updates) {
        a.insert_or_assign(u.param, kept->at(u.updated));
        b.insert_or_assign(u.param, fresh->at(u.updated));
        for (const auto& s : u.state) {
          a.insert_or_assign(s.first, kept->at(s.second));
          b.insert_or_assign(s.first, fresh->at(s.second));
        }
      }
    }
  }
}

// On one device, run_into computes the outputs in the caller's tensors (bound from the second
// step on, when the map holds them): the device's output tiles then are those tensors, nothing is
// copied, and each step equals a fresh run bit for bit, as the caller feeds the updated
// parameters back by swapping buffers (Session's training loop). A later run() into a fresh map
// computes in the arena again.
TEST(ThreadedRunner, OneDeviceComputesItsOutputsInTheCallersTensors) {
  Lowered l = lowered_train_step("gpt-tiny", "dp=1", 1);
  ThreadedRunner runner(l.g, l.programs);
  TensorMap feeds = testing::random_feeds(l.g, 9), kept;
  for (int64_t s = 1; s <= 3; ++s) {
    auto fresh = runner.run(feeds, {.optimizer_step = s});
    ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
    ASSERT_TRUE(runner.run_into(feeds, kept, {.optimizer_step = s}).ok());
    int64_t bound = 0;
    for (const auto& [v, t] : runner.device(0).outputs()) {
      EXPECT_TRUE(kept.at(v) == fresh->at(v)) << "step " << s << " " << l.g.value(v).name;
      bound += !t->is_int() && t->f32() == kept.at(v).f32();
    }
    if (s > 1) {
      EXPECT_EQ(bound, static_cast<int64_t>(l.g.outputs().size())) << "step " << s;
    }
    for (const ParamUpdate& u : l.updates) {
      std::swap(feeds.at(u.param), kept.at(u.updated));
      for (const auto& st : u.state) std::swap(feeds.at(st.first), kept.at(st.second));
    }
  }
  auto again = runner.run(feeds, {.optimizer_step = 4});
  ASSERT_TRUE(again.ok());
  for (const auto& [v, t] : runner.device(0).outputs())
    EXPECT_TRUE(t->is_int() || t->f32() != kept.at(v).f32()) << l.g.value(v).name;
}

// In a data-parallel training step every optimizer update is an output-only kernel: one per
// updated parameter, computing exactly that parameter's new value and optimizer state. A
// tensor-parallel step gathers its sharded updates, so those are not.
TEST(OutputKernels, DataParallelUpdatesAreOutputOnlyKernels) {
  for (auto [strategy, n] : {std::pair{"dp=2", 2}, {"dp=1", 1}, {"tp=2", 2}}) {
    Lowered l = lowered_train_step("gpt-tiny", strategy, n);
    for (const DeviceProgram& p : l.programs) {
      const std::vector<OutputKernel> found = output_only_kernels(l.g, p);
      size_t gathered = 0;
      for (const ParamUpdate& u : l.updates) {
        std::vector<ValueId> want{u.updated};
        for (const auto& st : u.state) want.push_back(st.second);
        std::sort(want.begin(), want.end());
        auto it = std::find_if(found.begin(), found.end(),
                               [&](const OutputKernel& k) { return k.outputs == want; });
        if (it == found.end()) {
          ++gathered;
          continue;
        }
        const Instr& in = p.instrs[it->instr];
        ASSERT_EQ(in.kind, Instr::Kind::kKernel);
        EXPECT_EQ(l.g.op(in.calls.back().op).kind, OpKind::kAdamW) << l.g.value(u.param).name;
      }
      if (std::string(strategy) == "tp=2") {
        EXPECT_GT(gathered * 2, l.updates.size()) << "most tp=2 updates are gathered after";
      } else {
        EXPECT_EQ(gathered, 0u) << strategy;
        EXPECT_EQ(found.size(), l.updates.size()) << strategy;
      }
    }
  }
}

// On two data-parallel devices, run_into gives each update to one device from the second step
// on: that device computes it straight into the caller's tensors, the other skips it (so its own
// tile of an update that changed since the first step is out of date). Every step equals a fresh
// runner's bit for bit, as the caller feeds the updated parameters back by swapping buffers
// (Session's loop).
TEST(ThreadedRunner, DataParallelDevicesComputeEachUpdateOnceIntoTheCallersTensors) {
  Lowered l = lowered_train_step("gpt-tiny", "dp=2", 2);
  ThreadedRunner runner(l.g, l.programs), fresh_runner(l.g, l.programs);
  TensorMap feeds = testing::random_feeds(l.g, 9), kept, first;
  for (const ParamUpdate& u : l.updates)  // AdamW's moments start at zero (random ones: NaNs)
    for (const auto& st : u.state) feeds.at(st.first).fill(0);
  TensorMap fresh_feeds = feeds;
  for (int64_t s = 1; s <= 3; ++s) {
    auto fresh = fresh_runner.run(fresh_feeds, {.optimizer_step = s});
    ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
    ASSERT_TRUE(runner.run_into(feeds, kept, {.optimizer_step = s}).ok());
    for (ValueId v : l.g.outputs())
      ASSERT_TRUE(kept.at(v) == fresh->at(v)) << "step " << s << " " << l.g.value(v).name;
    if (s == 1) first = *fresh;
    std::vector<int64_t> owned(2, 0);
    int64_t changed = 0;
    for (const ParamUpdate& u : s > 1 ? l.updates : std::vector<ParamUpdate>{}) {
      const ValueId v = u.updated;
      const bool moved = !(fresh->at(v) == first.at(v));  // since the first step
      int64_t bound = 0, stale = 0;
      for (int64_t d = 0; d < 2; ++d)
        for (const auto& [w, t] : runner.device(d).outputs()) {
          if (w != v) continue;
          const bool in_kept = t->f32() == kept.at(v).f32();
          bound += in_kept;
          owned[d] += in_kept;
          stale += !in_kept && !(*t == kept.at(v));
        }
      changed += moved;
      EXPECT_EQ(bound, 1) << "step " << s << " " << l.g.value(u.param).name;
      if (moved) {
        EXPECT_EQ(stale, 1) << "step " << s << " " << l.g.value(u.param).name;
      }
    }
    if (s > 1) {
      EXPECT_GT(owned[0], 0);
      EXPECT_GT(owned[1], 0);
      EXPECT_GT(changed * 2, static_cast<int64_t>(l.updates.size())) << "most updates move";
    }
    for (const ParamUpdate& u : l.updates) {
      std::swap(feeds.at(u.param), kept.at(u.updated));
      fresh_feeds.insert_or_assign(u.param, fresh->at(u.updated));
      for (const auto& st : u.state) {
        std::swap(feeds.at(st.first), kept.at(st.second));
        fresh_feeds.insert_or_assign(st.first, fresh->at(st.second));
      }
    }
  }
}

// Data parallel training issues each gradient's all-reduce next to its optimizer update: the
// executor batches them (one meeting of the devices instead of one per gradient), and the results
// equal those of executors that run every collective on its own, bit for bit.
TEST(DeviceExecutor, BatchedCollectivesGiveTheSameResults) {
  for (auto [model, strategy] : {std::pair{"gpt-tiny", "dp=2"}, {"gpt-tiny", "tp=2"}}) {
    Lowered l = lowered_train_step(model, strategy, 2);
    TensorMap feeds = testing::random_feeds(l.g, 4);
    ExecOptions o{.optimizer_step = 1};
    std::vector<TensorMap> outs(2);
    for (bool batch : {false, true}) {
      std::vector<std::unique_ptr<DeviceExecutor>> x;
      for (const DeviceProgram& p : l.programs)
        x.push_back(std::make_unique<DeviceExecutor>(l.g, p, true, batch));
      int64_t collectives = 0, batches = x[0]->collective_batches().size();  // no halo fetches
      for (int64_t k : x[0]->collective_batches()) collectives += k;
      EXPECT_EQ(x[0]->collective_batches(), x[1]->collective_batches()) << strategy;
      if (batch && std::string(strategy) == "dp=2") {
        EXPECT_LT(batches * 4, collectives) << "most gradient all-reduces batched";
      } else if (!batch) {
        EXPECT_EQ(batches, collectives);
      }
      ThreadedWorld world(2, true);
      std::vector<Status> st(2);
      std::thread peer([&] { st[1] = x[1]->run(world.endpoint(1), feeds, o, 1); });
      st[0] = x[0]->run(world.endpoint(0), feeds, o, 1);
      peer.join();
      ASSERT_TRUE(st[0].ok() && st[1].ok()) << strategy;
      x[0]->copy_outputs(outs[batch]);
    }
    for (ValueId v : l.g.outputs())
      EXPECT_TRUE(outs[0].at(v) == outs[1].at(v)) << strategy << " " << l.g.value(v).name;
  }
}

// A tensor-parallel training step ends with all-gathers that make the updated parameters and
// optimizer state whole: skip_gathers leaves each device its own tile of those values, equal to
// that part of the whole a gathering run computes (what an MPI rank feeds back between steps).
TEST(DeviceExecutor, SkippedOutputGathersLeaveEachDevicesOwnTile) {
  Lowered l = lowered_train_step("gpt-tiny", "tp=2", 2);
  TensorMap feeds = testing::random_feeds(l.g, 4);
  ExecOptions o{.optimizer_step = 1};
  std::vector<std::unique_ptr<DeviceExecutor>> x;
  for (const DeviceProgram& p : l.programs)
    x.push_back(std::make_unique<DeviceExecutor>(l.g, p, true, true));
  ASSERT_FALSE(x[0]->gathered_outputs().empty());
  auto run = [&] {
    ThreadedWorld world(2, true);
    std::vector<Status> st(2);
    std::thread peer([&] { st[1] = x[1]->run(world.endpoint(1), feeds, o, 1); });
    st[0] = x[0]->run(world.endpoint(0), feeds, o, 1);
    peer.join();
    ASSERT_TRUE(st[0].ok() && st[1].ok());
  };
  run();
  TensorMap whole;
  x[0]->copy_outputs(whole);
  for (auto& d : x) d->skip_gathers(std::vector<char>(d->gathered_outputs().size(), 1));
  run();
  for (auto& d : x) {
    int64_t own = 0;
    for (const auto& [v, t] : d->outputs()) {
      const bool gathered = std::any_of(d->gathered_outputs().begin(), d->gathered_outputs().end(),
                                        [&](const auto& g) { return g.first == v; });
      if (!gathered) continue;
      EXPECT_NE(t->region(), whole.at(v).region()) << l.g.value(v).name;
      EXPECT_TRUE(whole.at(v).crop(t->region()) == *t) << l.g.value(v).name;
      ++own;
    }
    EXPECT_EQ(own, static_cast<int64_t>(d->gathered_outputs().size()));
  }
}

// The planned peak is what the device holds at once: below the sum of all its tiles (memory is
// reused) and at least its largest tile.
TEST(ThreadedRunner, ReportsEachDevicesPeakBytes) {
  Lowered l = lowered_train_step("gpt-tiny", "dp=2", 2);
  ThreadedRunner runner(l.g, l.programs);
  auto peaks = runner.peak_bytes_per_device();
  ASSERT_EQ(peaks.size(), 2u);
  for (int64_t d = 0; d < 2; ++d) {
    int64_t total = 0, largest = 0;
    for (const Instr& in : l.programs[d].instrs) {
      std::vector<Box> made;
      if (in.kind == Instr::Kind::kCollective || in.kind == Instr::Kind::kFetch)
        made.push_back(in.box);
      for (const KernelCall& c : in.calls)
        for (const auto& r : l.g.op(c.op).results) made.push_back(r.proj.image(c.box));
      for (const Box& b : made) {
        total += b.volume() * 4;
        largest = std::max(largest, b.volume() * 4);
      }
    }
    EXPECT_GE(peaks[d], largest);
    EXPECT_LT(peaks[d], total / 2) << "device " << d;
  }
}

TEST(HostCores, DevicesShareTheCoresWithoutOversubscribing) {
  int cores = host_cores();
  EXPECT_GE(cores, 1);
  EXPECT_EQ(threads_per_device(1), cores);
  EXPECT_EQ(threads_per_device(cores), 1);
  EXPECT_EQ(threads_per_device(4 * cores), 1);
  EXPECT_EQ(threads_per_device(8, 3), 3);
}

// A kernel error on one device fails the run with that error and leaves the runner usable.
TEST(ThreadedRunner, AnErrorFailsOneRunOnly) {
  Lowered l = lowered_train_step("gpt-tiny", "dp=2", 2);
  TensorMap feeds = testing::random_feeds(l.g, 9), bad = feeds;
  for (ValueId v : l.g.inputs())
    if (bad.at(v).is_int()) bad.at(v).fill(1e6);  // token ids and labels out of range
  ThreadedRunner runner(l.g, l.programs);
  auto good = runner.run(feeds);
  ASSERT_TRUE(good.ok());
  auto failed = runner.run(bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("outside"), std::string::npos) << failed.error().message;
  auto again = runner.run(feeds);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  for (ValueId v : l.g.outputs()) EXPECT_TRUE(good->at(v) == again->at(v));
}

}  // namespace
}  // namespace heddle
