// Ring attention (cp_comm=ring): the cp axis's gathers of keys and values lowered as ring steps
// (send to the next member, receive from the previous) interleaved with the consuming ops' block
// kernels. The programs count the steps, move the all-gather's bytes, and compute what the
// all-gather form computes, in forward and backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/RandomFeeds.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/zoo/Zoo.h"
#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/runtime/ThreadedCommunicator.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

// A gpt-tiny training step (batch 4, sequence 32) and its plan for `strategy`.
struct Planned {
  Graph g;
  ShardingPlan plan;
  std::vector<ParamUpdate> updates;
};

Planned train_step(const std::string& strategy, int64_t devices) {
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model("gpt-tiny", zoo::ZooOverrides::sized(4), mo);
  EXPECT_TRUE(fwd.ok());
  auto step = build_train_step(*fwd);
  EXPECT_TRUE(step.ok());
  for (const auto& u : step->updates) step->graph.add_output(u.grad);  // compared directly
  auto spec = StrategySpec::parse(strategy);
  EXPECT_TRUE(spec.ok()) << strategy;
  auto p = plan_from_strategy(step->graph, *spec->mesh(devices), *spec);
  EXPECT_TRUE(p.ok()) << p.error().to_string();
  return {std::move(step->graph), p->plan, std::move(step->updates)};
}

// Collectives of `c` over `group` in `p`.
int64_t count(const DeviceProgram& p, Collective c, const std::vector<int64_t>& group) {
  int64_t n = 0;
  for (const Instr& in : p.instrs)
    n += in.kind == Instr::Kind::kCollective && in.collective == c && in.group == group;
  return n;
}

TEST(RingAttention, EachGatherBecomesCpMinusOnePointToPointSteps) {
  for (auto [strategy, cp] : {std::pair{"cp=2,dp=2", 2}, {"cp=4", 4}, {"cp=2,tp=2", 2}}) {
    Planned gathered = train_step(std::string(strategy) + ",cp_comm=allgather", 4);
    Planned ring = train_step(std::string(strategy) + ",cp_comm=ring", 4);
    const int64_t axis = ring.plan.mesh.find("cp");
    ASSERT_EQ(ring.plan.ring_axis, axis) << strategy;
    EXPECT_EQ(gathered.plan.ring_axis, -1);
    EXPECT_EQ(train_step(strategy, 4).plan.ring_axis, axis) << strategy << ": the default";
    auto a = lower(gathered.g, gathered.plan);
    LowerOptions every_block;  // the blocks a causal mask hides too (counted below)
    every_block.skip_hidden_blocks = false;
    auto r = lower(ring.g, ring.plan, every_block);
    ASSERT_TRUE(a.ok() && r.ok()) << strategy;
    int64_t rings = 0;
    for (int64_t d = 0; d < 4; ++d) {
      const DeviceProgram &pa = (*a)[d], &pr = (*r)[d];
      const std::vector<int64_t> group = ring.plan.mesh.group(axis, d);
      // Every all-gather of the cp axis that feeds an op walking its blocks is a ring; the
      // keys and values of both layers (forward) are, at least.
      const int64_t turned =
          count(pa, Collective::kAllGather, group) - count(pr, Collective::kAllGather, group);
      EXPECT_GE(turned, 4) << strategy << " device " << d << "\n"
                           << pr.to_string(ring.g, ring.plan.mesh);
      EXPECT_EQ(count(pr, Collective::kSendRecv, group), turned * (cp - 1)) << strategy;
      rings += turned;
      // Each ring's steps receive the other members' blocks, each once, into the gathered tile;
      // each block's kernel follows its block.
      int64_t received = 0, blocks = 0;
      for (const Instr& in : pr.instrs) {
        if (in.kind == Instr::Kind::kCollective && in.ring > 0) {
          EXPECT_EQ(in.group, group);
          EXPECT_TRUE(in.whole.contains(in.box));
          received += in.box.volume();
          if (in.ring == cp - 1) {
            EXPECT_EQ(received * cp, in.whole.volume() * (cp - 1)) << strategy;
            received = 0;
          }
        }
        if (in.kind == Instr::Kind::kKernel && in.ring >= 0) {
          ++blocks;
          EXPECT_EQ(in.calls.size(), 1u);
          EXPECT_TRUE(in.whole.contains(in.calls[0].box));
          EXPECT_EQ(in.calls[0].box.volume() * cp, in.whole.volume()) << strategy;
        }
      }
      EXPECT_EQ(blocks, turned * cp) << strategy;
    }
    // The same bytes as the all-gathers (BytesMovedCost: (n-1)/n of the gathered tile).
    ProgramStats sa = program_stats(gathered.g, *a), sr = program_stats(ring.g, *r);
    EXPECT_EQ(sr.ring_steps, rings * (cp - 1)) << strategy;
    EXPECT_EQ(sa.ring_steps, 0);
    EXPECT_NEAR(sr.comm_bytes, sa.comm_bytes, 1e-9 * sa.comm_bytes) << strategy;
  }
}

// The ring form computes the all-gather form's step: the loss and the gradients agree to rounding
// (the blocks of a key-reducing product add up in another order).
TEST(RingAttention, TrainingStepsMatchTheAllGatherForm) {
  for (auto strategy : {"cp=2,dp=2", "cp=4", "cp=2,tp=2"}) {
    Planned gathered = train_step(std::string(strategy) + ",cp_comm=allgather", 4);
    Planned ring = train_step(std::string(strategy) + ",cp_comm=ring", 4);
    TensorMap feeds = testing::random_feeds(gathered.g, 5);
    for (const auto& u : gathered.updates)  // fresh optimizer state (random moments give NaN)
      for (const auto& st : u.state)
        feeds.insert_or_assign(st.first, Tensor(gathered.g.type(st.first)));
    auto a = run_threaded(gathered.g, *lower(gathered.g, gathered.plan), feeds);
    auto r = run_threaded(ring.g, *lower(ring.g, ring.plan), feeds);
    ASSERT_TRUE(a.ok() && r.ok()) << strategy;
    // The loss and every gradient (an AdamW update of a near-zero gradient is ill-conditioned:
    // its sign follows rounding, as `run --check` notes).
    std::vector<ValueId> compared = {gathered.g.outputs()[0]};
    for (const auto& u : gathered.updates) compared.push_back(u.grad);
    for (ValueId v : compared) {
      const Tensor &x = a->at(v), &y = r->at(v);
      ASSERT_EQ(x.numel(), y.numel());
      for (int64_t i = 0; i < x.numel(); ++i)
        ASSERT_NEAR(x.f32()[i], y.f32()[i], 1e-4 * std::max(1.0f, std::fabs(x.f32()[i])))
            << strategy << " " << gathered.g.value(v).name << "[" << i << "]";
    }
  }
}

// A device's communicator whose ring exchanges cannot finish before the device has run the block
// kernel that precedes them in the program: its k-th send-recv waits (up to `patience`) until the
// device has ended as many ring block kernels as the program has before its k-th ring step.
// Only an executor that posts the step before that kernel and runs the kernel meanwhile passes
// without timing out.
class GatedEndpoint : public Communicator {
 public:
  GatedEndpoint(Communicator& inner, std::vector<int64_t> blocks_before,
                std::chrono::milliseconds patience)
      : inner_(inner), blocks_before_(std::move(blocks_before)), patience_(patience) {}
  int64_t rank() const override { return inner_.rank(); }
  int64_t size() const override { return inner_.size(); }
  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override {
    if (c == Collective::kSendRecv) {
      std::unique_lock<std::mutex> lock(m_);
      const int64_t need = blocks_before_.at(static_cast<size_t>(steps_++));
      if (!cv_.wait_for(lock, patience_, [&] { return blocks_ended_ >= need; })) ++timeouts_;
    }
    return inner_.collective(c, group, mine, out, monoid);
  }
  void block_ended() {
    {
      std::lock_guard<std::mutex> lock(m_);
      ++blocks_ended_;
    }
    cv_.notify_all();
  }
  int64_t timeouts() const { return timeouts_; }

 private:
  Communicator& inner_;
  std::vector<int64_t> blocks_before_;
  std::chrono::milliseconds patience_;
  std::mutex m_;
  std::condition_variable cv_;
  int64_t steps_ = 0, blocks_ended_ = 0, timeouts_ = 0;
};

// Overlap (ExecOptions::overlap_ring): each ring step is posted before the kernel of the block the
// device holds and waited for after it (the event order), the exchange really runs while the
// kernel does (the gate above opens only once the kernel has ended), and the results are the
// blocking form's bit for bit. With overlap off, every gate times out: the step runs first.
TEST(RingAttention, StepsArePostedBeforeTheBlockKernelAndOverlapIt) {
  Planned ring = train_step("cp=2,dp=2,cp_comm=ring", 4);
  auto programs = lower(ring.g, ring.plan);
  ASSERT_TRUE(programs.ok());
  TensorMap feeds = testing::random_feeds(ring.g, 5);
  for (const auto& u : ring.updates)
    for (const auto& st : u.state) feeds.insert_or_assign(st.first, Tensor(ring.g.type(st.first)));
  std::vector<TensorMap> outs(2);
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "blocking");
    ThreadedWorld world(4);
    std::vector<std::unique_ptr<DeviceExecutor>> x;
    std::vector<std::unique_ptr<GatedEndpoint>> gates;
    std::vector<std::vector<RingEvent>> events(4);
    std::vector<ExecOptions> opts(4);
    for (int64_t d = 0; d < 4; ++d) {
      x.push_back(std::make_unique<DeviceExecutor>(ring.g, (*programs)[d]));
      std::vector<int64_t> before;  // ring block kernels before each ring step
      int64_t blocks = 0;
      for (const Instr& in : x.back()->program().instrs) {
        if (in.kind == Instr::Kind::kKernel && in.ring >= 0) ++blocks;
        if (in.kind == Instr::Kind::kCollective && in.ring > 0) before.push_back(blocks);
      }
      ASSERT_GE(before.size(), 4u);
      gates.push_back(std::make_unique<GatedEndpoint>(
          world.endpoint(d), before,
          overlap ? std::chrono::milliseconds(10000) : std::chrono::milliseconds(20)));
      opts[d].overlap_ring = overlap;
      opts[d].on_ring_event = [&events, &gates, d](const RingEvent& e) {
        events[d].push_back(e);
        if (e.kind == RingEvent::Kind::kKernelEnd) gates[d]->block_ended();
      };
    }
    std::vector<Status> st(4);
    std::vector<std::thread> threads;
    for (int64_t d = 0; d < 4; ++d)
      threads.emplace_back([&, d] { st[d] = x[d]->run(*gates[d], feeds, opts[d], 1); });
    for (auto& t : threads) t.join();
    for (int64_t d = 0; d < 4; ++d) {
      ASSERT_TRUE(st[d].ok()) << st[d].error().to_string();
      const int64_t steps = static_cast<int64_t>(
          std::count_if(events[d].begin(), events[d].end(),
                        [](const RingEvent& e) { return e.kind == RingEvent::Kind::kPosted; }));
      EXPECT_EQ(gates[d]->timeouts(), overlap ? 0 : steps) << "device " << d;
      // Overlap: posted(step s), begin(block s-1), end(block s-1), waited(step s) for every step;
      // blocking: posted, waited, then the block.
      using K = RingEvent::Kind;
      for (size_t i = 0; i < events[d].size(); ++i) {
        if (events[d][i].kind != K::kPosted) continue;
        ASSERT_LT(i + 3, events[d].size());
        const std::vector<K> want =
            overlap ? std::vector<K>{K::kKernelBegin, K::kKernelEnd, K::kWaited}
                    : std::vector<K>{K::kWaited, K::kKernelBegin, K::kKernelEnd};
        for (size_t k = 0; k < 3; ++k)
          EXPECT_EQ(events[d][i + 1 + k].kind, want[k]) << "device " << d << " event " << i + 1 + k;
        const Instr* step = events[d][i].instr;
        EXPECT_EQ(events[d][i + 1 + (overlap ? 2 : 0)].instr, step);
        EXPECT_EQ(events[d][i + (overlap ? 1 : 2)].instr->ring, step->ring - 1);
      }
      x[d]->copy_outputs(outs[overlap ? 0 : 1]);
    }
  }
  for (const auto& [v, t] : outs[0]) {
    const Tensor& u = outs[1].at(v);
    ASSERT_EQ(t.numel(), u.numel());
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(t.f32()[i], u.f32()[i]) << ring.g.value(v).name << "[" << i << "]";
  }
}

// Causal block skipping: with a contiguous split a device's queries see no key block of the
// members after it, so of each ring's cp blocks the device at ring position i runs i+1: the
// scores the mask replaces are never computed and the probability blocks that are all zero are
// never multiplied. The step is the one that runs every block, bit for bit.
TEST(RingAttention, BlocksTheCausalMaskHidesEntirelyAreLeftOut) {
  Planned ring = train_step("cp=4", 4);
  LowerOptions dense;
  dense.skip_hidden_blocks = false;
  auto skipped = lower(ring.g, ring.plan);
  auto all = lower(ring.g, ring.plan, dense);
  ASSERT_TRUE(skipped.ok() && all.ok());
  const int64_t axis = ring.plan.mesh.find("cp");
  auto blocks = [](const DeviceProgram& p) {
    int64_t n = 0;
    for (const Instr& in : p.instrs) n += in.kind == Instr::Kind::kKernel && in.ring >= 0;
    return n;
  };
  const int64_t rings = blocks((*all)[0]) / 4;
  EXPECT_EQ(rings, 4);  // scores and probabilities times values, in both layers
  for (int64_t d = 0; d < 4; ++d) {
    const std::vector<int64_t> group = ring.plan.mesh.group(axis, d);
    const int64_t pos = std::find(group.begin(), group.end(), d) - group.begin();
    EXPECT_EQ(blocks((*all)[d]), rings * 4) << "device " << d;
    EXPECT_EQ(blocks((*skipped)[d]), rings * (pos + 1)) << "device " << d;
  }
  TensorMap feeds = testing::random_feeds(ring.g, 5);
  for (const auto& u : ring.updates)
    for (const auto& st : u.state) feeds.insert_or_assign(st.first, Tensor(ring.g.type(st.first)));
  auto a = run_threaded(ring.g, *all, feeds);
  auto s = run_threaded(ring.g, *skipped, feeds);
  ASSERT_TRUE(a.ok() && s.ok());
  for (ValueId v : ring.g.outputs()) {
    const Tensor &x = a->at(v), &y = s->at(v);
    ASSERT_EQ(x.numel(), y.numel());
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(x.f32()[i], y.f32()[i]) << ring.g.value(v).name << "[" << i << "]";
  }
}

}  // namespace
}  // namespace heddle
