// Partitioned execution checked against single-device execution: random graphs (contractions,
// broadcasting, reductions, windows with halos, reshapes) on random meshes of 1 to 8 devices with
// random valid strategies per op, lowered, run on threads and compared element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/OpByOp.h"
#include "common/RandomFeeds.h"
#include "common/RandomModel.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ops/Kernel.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"

namespace heddle {
namespace {

using testing::op_by_op;
using testing::random_feeds;

bool close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-4 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

::testing::AssertionResult same(const Tensor& want, const Tensor& got) {
  if (want.region() != got.region())
    return ::testing::AssertionFailure()
           << "region " << got.region().to_string() << " vs " << want.region().to_string();
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = want.is_int() ? want.i64()[i] : want.f32()[i];
    double b = got.is_int() ? got.i64()[i] : got.f32()[i];
    if (!close(a, b))
      return ::testing::AssertionFailure() << "element " << i << ": " << b << " vs " << a;
  }
  return ::testing::AssertionSuccess();
}

ShardingPlan random_plan(const Graph& g, const Mesh& mesh, std::mt19937_64& rng) {
  ShardingPlan plan = ShardingPlan::replicated(g, mesh);
  for (OpId i = 0; i < g.num_ops(); ++i) {
    auto all = enumerate_strategies(g, i, mesh);
    plan.ops[i] = all[rng() % all.size()];
  }
  return plan;
}

TEST(Execute, RandomGraphsMeshesAndStrategiesMatchTheReference) {
  const char* meshes[] = {"1", "2", "4", "8", "2x2", "2x4", "4x2", "2x2x2", "a=2,b=3", "3"};
  std::mt19937_64 rng(2026);
  int64_t cases = 0, collectives = 0, fetches = 0, fused = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    Graph g = testing::random_model(8, seed);
    TensorMap feeds = random_feeds(g, seed);
    TensorMap want = op_by_op(g, feeds);
    for (int rep = 0; rep < 7; ++rep) {
      Mesh mesh = *Mesh::parse(meshes[rng() % 10]);
      ShardingPlan plan = random_plan(g, mesh, rng);
      auto progs = lower(g, plan);
      ASSERT_TRUE(progs.ok()) << progs.error().to_string();
      ProgramStats st = program_stats(g, *progs);
      collectives += st.collectives;
      fetches += st.fetches;
      fused += st.fused;
      auto got = run_threaded(g, *progs, feeds);
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      for (ValueId v : g.outputs())
        ASSERT_TRUE(same(want.at(v), got->at(v)))
            << "seed " << seed << " mesh " << mesh.to_string() << "\n"
            << plan.to_string(g) << "\n"
            << (*progs)[0].to_string(g, mesh);
      ++cases;
    }
  }
  EXPECT_GE(cases, 1000);
  // The generator must exercise communication, halos and fusion, not only local compute.
  EXPECT_GT(collectives, 1000);
  EXPECT_GT(fetches, 50);
  EXPECT_GT(fused, 50);
}

TEST(Execute, RepeatedRunsAreBitIdentical) {
  Graph g = testing::random_model(20, 77);
  TensorMap feeds = random_feeds(g, 1);
  Mesh mesh = *Mesh::parse("2x2");
  std::mt19937_64 rng(3);
  ShardingPlan plan = random_plan(g, mesh, rng);
  auto progs = lower(g, plan);
  ASSERT_TRUE(progs.ok());
  auto a = run_threaded(g, *progs, feeds), b = run_threaded(g, *progs, feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  for (ValueId v : g.outputs()) EXPECT_TRUE(a->at(v) == b->at(v));
}

TEST(Execute, ConvolutionRowShardsExchangeHalos) {
  auto g = parse_graph(
      "graph conv {\n input %img: f32[2, 3, 16, 16]\n param %k: f32[4, 3, 3, 3]\n"
      " %c: f32[2, 4, 8, 8] = conv2d{padding=[1, 1], stride=[2, 2]} [n=2, co=4, oh=8, ow=8, "
      "ci=3:sum] "
      "%img(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 3, 3] padded, %k(co, ci, 0, 0)[1, 1, 3, 3] -> "
      "(n, co, oh, ow)\n output %c\n}");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  Mesh mesh = *Mesh::parse("h=4");
  ShardingPlan plan{mesh, {OpStrategy({2})}, {}};
  auto progs = lower(*g, plan);
  ASSERT_TRUE(progs.ok());
  EXPECT_EQ(program_stats(*g, *progs).fetches, 4);
  // Device 1 computes output rows 2..3, reading input rows 3..7: one row above its block 4..7.
  EXPECT_NE(
      (*progs)[1].to_string(*g, mesh).find("fetch %img group {0,1,2,3} -> [0:2, 0:3, 3:8, 0:16]"),
      std::string::npos)
      << (*progs)[1].to_string(*g, mesh);
  TensorMap feeds = random_feeds(*g, 5);
  auto got = run_threaded(*g, *progs, feeds);
  ASSERT_TRUE(got.ok());
  TensorMap want = op_by_op(*g, feeds);
  EXPECT_TRUE(same(want.begin()->second, got->begin()->second));
}

TEST(Execute, RowParallelMatmulAllReducesItsPartialSums) {
  auto g = parse_graph(
      "graph mm {\n input %a: f32[4, 8]\n param %b: f32[8, 6]\n"
      " %c: f32[4, 6] = einsum{spec=\"mk,kn->mn\"} [m=4, n=6, k=8:sum] %a(m, k), %b(k, n) -> (m, "
      "n)\n"
      " %r: f32[4, 6] = relu [m=4, n=6] %c(m, n) -> (m, n)\n"
      " %e: f32[4, 6] = exp [m=4, n=6] %r(m, n) -> (m, n)\n output %e\n}");
  ASSERT_TRUE(g.ok());
  Mesh mesh = *Mesh::parse("tp=2");
  ShardingPlan plan{mesh, {OpStrategy({2}), OpStrategy({1}), OpStrategy({1})}, {}};
  auto progs = lower(*g, plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  std::string text = (*progs)[0].to_string(*g, mesh);
  // The partial sums meet in a reduce-scatter (cheaper than all-reduce + slice); relu and exp
  // fuse into one instruction; the output is gathered at the end.
  EXPECT_NE(text.find("reduce-scatter %c group {0,1} -> [0:4, 0:3]"), std::string::npos) << text;
  EXPECT_NE(text.find("fused %r = relu [0:4, 0:3]; %e = exp [0:4, 0:3]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("all-gather %e group {0,1} -> [0:4, 0:6]"), std::string::npos) << text;
  TensorMap feeds = random_feeds(*g, 9);
  auto got = run_threaded(*g, *progs, feeds);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(same(op_by_op(*g, feeds).begin()->second, got->begin()->second));
}

TEST(Execute, AKernelErrorOnOneDeviceFailsTheRunWithoutHanging) {
  // Labels out of range make cross_entropy fail on the devices that hold them.
  auto g = parse_graph(
      "graph ce {\n input %logits: f32[4, 5]\n input %labels: i64[4]\n"
      " %l: f32[4] = cross_entropy [s=4] %logits(s, 0)[1, 5], %labels(s) -> (s)\n"
      " %y: f32[4] = exp [s=4] %l(s) -> (s)\n output %y\n}");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  Mesh mesh = *Mesh::parse("2");
  ShardingPlan plan{mesh, {OpStrategy({0}), OpStrategy({0})}, {}};
  auto progs = lower(*g, plan);
  ASSERT_TRUE(progs.ok()) << progs.error().to_string();
  TensorMap feeds = random_feeds(*g, 1);
  feeds.at(*g->find_value("labels")).i64()[3] = 99;  // device 1's block
  auto got = run_threaded(*g, *progs, feeds);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message.find("collective abandoned"), std::string::npos)
      << got.error().message;
}

}  // namespace
}  // namespace heddle
