// The own loops on the device's threads (src/ops/KernelParallel.h): every op of the zoo
// transformers' training steps, and their fused chains, give bitwise the same outputs on 2 and 3
// threads (split into the smallest pieces) as on one, run after run; the contractions, whose
// sgemms split into blocks, match to rounding.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "OpsTestUtil.h"
#include "heddle/ops/Chain.h"
#include "heddle/ops/Kernel.h"

namespace heddle {
namespace {

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Graph train_graph(const char* name) { return testing::small_train_graph(name, 10, 24, 3, 13); }

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.region() == b.region() &&
         std::memcmp(a.f32(), b.f32(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// A random non-empty sub-box of `b`, or `b` itself half of the time.
Box some_box(const Box& b, std::mt19937& rng) {
  if (uniform(rng, 0, 1) == 0) return b;
  std::vector<int64_t> s, e;
  for (int64_t d = 0; d < b.rank(); ++d) {
    int64_t x = uniform(rng, b.start()[d], b.end()[d] - 1),
            y = uniform(rng, b.start()[d], b.end()[d] - 1);
    s.push_back(std::min(x, y));
    e.push_back(std::max(x, y) + 1);
  }
  return Box(IVec(s), IVec(e));
}

// Runs op over `box` on whole random tensors at `threads` threads (grain 1: the smallest pieces).
std::vector<Tensor> run_at(const Graph& g, const Op& op, const Box& box,
                           std::map<ValueId, Tensor>& full, std::mt19937& rng, int threads,
                           bool accumulate) {
  auto value = [&](ValueId v) -> Tensor& {
    auto it = full.find(v);
    if (it == full.end())
      it = full.emplace(v, testing::random_tensor(g.type(v), rng, -1.0, 1.0, 2)).first;
    return it->second;
  };
  std::vector<const Tensor*> ins;
  for (const auto& x : op.inputs) ins.push_back(&value(x.value));
  std::vector<Tensor> outs;
  for (const auto& r : op.results) outs.push_back(value(r.value).crop(value(r.value).region()));
  std::vector<Tensor*> po;
  for (auto& t : outs) po.push_back(&t);
  kernels::KernelOptions o;
  o.threads = threads;
  o.grain = threads > 1 ? 1 : o.grain;
  o.accumulate = accumulate;
  o.optimizer_step = 3;
  Status st = kernels::run(op, box, ins, po, o);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  return outs;
}

TEST(ParallelKernels, EveryTrainingOpOnTwoAndThreeThreadsIsBitwiseOneThreads) {
  std::mt19937 rng(2026);
  int64_t checked = 0;
  for (const char* name : {"gpt-tiny", "llama-tiny", "moe-tiny"}) {
    SCOPED_TRACE(name);
    Graph g = train_graph(name);
    std::map<ValueId, Tensor> full;
    for (int round = 0; round < 3; ++round)
      for (const Op& op : g.ops()) {
        if (op.kind == OpKind::kFill) continue;
        const Box box = some_box(op.space.box(), rng);
        const bool acc = uniform(rng, 0, 1) == 1;
        const int threads = static_cast<int>(uniform(rng, 2, 3));
        SCOPED_TRACE(std::string(op_kind_name(op.kind)) + " box " + box.to_string() + " threads " +
                     std::to_string(threads) + (acc ? " accumulate" : ""));
        std::vector<Tensor> one = run_at(g, op, box, full, rng, 1, acc);
        std::vector<Tensor> many = run_at(g, op, box, full, rng, threads, acc);
        std::vector<Tensor> again = run_at(g, op, box, full, rng, threads, acc);
        for (size_t i = 0; i < one.size(); ++i) {
          EXPECT_TRUE(same_bits(many[i], again[i])) << "not deterministic, result " << i;
          if (op.kind == OpKind::kEinsum)
            EXPECT_LT(testing::max_rel_diff(many[i], one[i]), 1e-5) << "result " << i;
          else
            EXPECT_TRUE(same_bits(many[i], one[i])) << "result " << i;
        }
        ++checked;
      }
  }
  EXPECT_GT(checked, 1000);
}

// The fused elementwise chains of the training steps (as in FastKernelTest), run_chain on 1, 2
// and 3 threads: bitwise equal, but for chains led by a product on hosts whose split sgemms are
// OpenBLAS's (kernels::onednn_sgemm_first()), which match to rounding; repeatable everywhere.
TEST(ParallelKernels, FusedChainsOnTwoAndThreeThreadsAreBitwiseOneThreads) {
  std::mt19937 rng(7);
  int64_t chains = 0;
  for (const char* name : {"gpt-tiny", "llama-tiny", "moe-tiny"}) {
    SCOPED_TRACE(name);
    Graph g = train_graph(name);
    std::map<ValueId, Tensor> full;
    auto input = [&](ValueId v) -> const Tensor* {
      auto it = full.find(v);
      if (it == full.end())
        it = full.emplace(v, testing::random_tensor(g.type(v), rng, -1.0, 1.0, 2)).first;
      return &it->second;
    };
    testing::for_each_chain(g, [&](const std::vector<OpId>& ops,
                                   const std::vector<ValueId>& temps) {
      // The chain's calls over one random box when they share one space, else each whole.
      bool one_space = true;
      for (OpId id : ops) one_space = one_space && g.op(id).space.box() == g.op(ops[0]).space.box();
      const Box box = some_box(g.op(ops[0]).space.box(), rng);
      std::vector<kernels::ChainCall> calls;
      for (OpId id : ops) calls.push_back({id, one_space ? box : g.op(id).space.box()});
      for (const auto& c : calls)  // inputs made before the runs: the map stays fixed
        for (const auto& x : g.op(c.op).inputs) input(x.value);
      // A chain led by a product matches to rounding where the split sgemms are OpenBLAS's.
      const bool bitwise = kernels::onednn_sgemm_first() || g.op(ops[0]).kind != OpKind::kEinsum;
      kernels::KernelOptions o;
      auto one = kernels::run_chain(g, calls, temps, input, o);
      ASSERT_TRUE(one.ok()) << one.error().to_string();
      for (int threads : {2, 3}) {
        o.threads = threads;
        o.grain = 1;
        auto many = kernels::run_chain(g, calls, temps, input, o);
        auto again = kernels::run_chain(g, calls, temps, input, o);
        ASSERT_TRUE(many.ok()) << many.error().to_string();
        ASSERT_TRUE(again.ok()) << again.error().to_string();
        ASSERT_EQ(many->size(), one->size());
        for (size_t i = 0; i < one->size(); ++i) {
          const auto& [v, t] = (*one)[i];
          const std::string what = "chain at op " + std::to_string(ops[0]) + ", value " +
                                   std::to_string(v) + ", " + std::to_string(threads) + " threads";
          EXPECT_TRUE(same_bits((*many)[i].second, (*again)[i].second)) << what;
          if (bitwise)
            EXPECT_TRUE(same_bits((*many)[i].second, t)) << what;
          else
            EXPECT_LT(testing::max_rel_diff((*many)[i].second, t), 1e-5) << what;
        }
      }
      ++chains;
    });
  }
  EXPECT_GT(chains, 8);
}

}  // namespace
}  // namespace heddle
