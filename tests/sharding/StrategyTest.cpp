// Meshes, placements and strategies derived from projections: hand-picked ops with known answers,
// and a soundness property over random graphs and meshes checked point by point.
#include <gtest/gtest.h>

#include <random>

#include "common/RandomGraph.h"
#include "heddle/ir/TextParser.h"
#include "heddle/sharding/OpStrategy.h"
#include "heddle/sharding/StrategySpec.h"

namespace heddle {
namespace {

Mesh mesh(const char* text) { return *Mesh::parse(text); }

Graph parse(const std::string& body) {
  auto g = parse_graph("graph g {\n" + body + "\n}\n");
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return std::move(*g);
}

TEST(Mesh, ParsesShapesAndNamesAndRejectsNonsense) {
  EXPECT_EQ(mesh("4").to_string(), "x=4");
  EXPECT_EQ(mesh("2x4").to_string(), "x=2,y=4");
  EXPECT_EQ(mesh("dp=2,tp=2").to_string(), "dp=2,tp=2");
  Mesh m = mesh("dp=2,tp=3");
  EXPECT_EQ(m.num_devices(), 6);
  EXPECT_EQ(m.coords(4), (IVec{1, 1}));
  EXPECT_EQ(m.device(IVec{1, 2}), 5);
  EXPECT_EQ(m.group(1, 4), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(m.group(0, 4), (std::vector<int64_t>{1, 4}));
  for (const char* bad : {"", "0", "2x", "dp=2,dp=2", "x=-1", "2xq", "1bad=2"}) {
    auto r = Mesh::parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(Mesh::parse("dp=2,tp=0").error().message,
            "mesh axis size '0' in 'dp=2,tp=0' must be a positive integer");
}

TEST(Placement, LocalBoxesCutMajorToMinor) {
  Mesh m = mesh("a=2,b=2");
  TensorSharding s({Placement::shard(0), Placement::shard(0)});
  EXPECT_EQ(s.to_string(), "[Shard(0), Shard(0)]");
  // Device (a, b) holds block 2a + b of four.
  EXPECT_EQ(s.local_box(IVec{8, 3}, m, m.device(IVec{0, 1})), Box({2, 0}, {4, 3}));
  EXPECT_EQ(s.local_box(IVec{8, 3}, m, m.device(IVec{1, 0})), Box({4, 0}, {6, 3}));
  TensorSharding t({Placement::replicate(), Placement::partial(Monoid::kMax)});
  EXPECT_EQ(t.to_string(), "[Replicate, Partial(max)]");
  EXPECT_EQ(t.local_box(IVec{8, 3}, m, 3), Box({0, 0}, {8, 3}));
}

const char* kMatmul =
    "input %a: f32[8, 16]\n input %b: f32[16, 4]\n"
    " %c: f32[8, 4] = einsum{spec=\"mk,kn->mn\"} [m=8, n=4, k=16:sum] %a(m, k), %b(k, n) -> (m, n)";

TEST(Strategy, MatmulPlacementsFollowTheProjections) {
  Graph g = parse(kMatmul);
  Mesh m = mesh("dp=2,tp=2");
  auto dp_tp = derive_placements(g, 0, m, OpStrategy({0, 1}));  // dp splits m, tp splits n
  ASSERT_TRUE(dp_tp.ok()) << dp_tp.error().to_string();
  EXPECT_EQ(dp_tp->inputs[0].sharding.to_string(), "[Shard(0), Replicate]");
  EXPECT_EQ(dp_tp->inputs[1].sharding.to_string(), "[Replicate, Shard(1)]");
  EXPECT_EQ(dp_tp->results[0].sharding.to_string(), "[Shard(0), Shard(1)]");
  auto row = derive_placements(g, 0, m, OpStrategy({0, 2}));  // tp splits the reduction k
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->inputs[0].sharding.to_string(), "[Shard(0), Shard(1)]");
  EXPECT_EQ(row->inputs[1].sharding.to_string(), "[Replicate, Shard(0)]");
  EXPECT_EQ(row->results[0].sharding.to_string(), "[Shard(0), Partial(sum)]");
  auto both = derive_placements(g, 0, m, OpStrategy({2, 2}));  // k split over both axes
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->inputs[1].sharding.to_string(), "[Shard(0), Shard(0)]");
  EXPECT_EQ(both->results[0].sharding.to_string(), "[Partial(sum), Partial(sum)]");
  // Every combination of {none, m, n, k} per axis divides here: 4 x 4 strategies.
  EXPECT_EQ(enumerate_strategies(g, 0, m).size(), 16u);
  EXPECT_EQ(enumerate_strategies(g, 0, m).front(), OpStrategy::replicated(2));
}

TEST(Strategy, NonDividingMeshGivesUnevenBlocks) {
  Graph g = parse(kMatmul);
  auto r = derive_placements(g, 0, mesh("tp=3"), OpStrategy({0}));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->results[0].sharding.to_string(), "[Shard(0)]");
  IVec shape = g.type(g.op(0).results[0].value).shape();
  std::vector<std::string> rows;
  for (int64_t d = 0; d < 3; ++d)
    rows.push_back(r->results[0].sharding.local_box(shape, mesh("tp=3"), d).to_string());
  EXPECT_EQ(rows, (std::vector<std::string>{"[0:3, 0:4]", "[3:6, 0:4]", "[6:8, 0:4]"}));
  EXPECT_GT(enumerate_strategies(g, 0, mesh("tp=3")).size(), 1u);
}

TEST(Strategy, ConvolutionShardsGetHalos) {
  Graph g = parse(
      "input %img: f32[2, 3, 32, 32]\n param %k: f32[4, 3, 3, 3]\n"
      " %c: f32[2, 4, 16, 16] = conv2d{padding=[1, 1], stride=[2, 2]} [n=2, co=4, oh=16, ow=16, "
      "ci=3:sum] "
      "%img(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 3, 3] padded, %k(co, ci, 0, 0)[1, 1, 3, 3] -> "
      "(n, co, oh, ow)");
  auto r = derive_placements(g, 0, mesh("4"), OpStrategy({2}));  // split output rows
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const OperandSharding& x = r->inputs[0];
  EXPECT_EQ(x.sharding.to_string(), "[Shard(2)]");
  EXPECT_EQ(x.halo_lo, (IVec{0, 0, 1, 0}));  // one row from the block above (stride 2, pad 1)
  EXPECT_EQ(x.halo_hi, (IVec{0, 0, 0, 0}));
  EXPECT_EQ(r->inputs[1].sharding.to_string(), "[Replicate]");
  auto ci = derive_placements(g, 0, mesh("3"), OpStrategy({4}));
  ASSERT_TRUE(ci.ok());
  EXPECT_EQ(ci->results[0].sharding.to_string(), "[Partial(sum)]");
  EXPECT_FALSE(ci->inputs[0].has_halo());
}

TEST(Strategy, ReshapeMinorSplitFetchesTheRangeItReads) {
  Graph g = parse(
      "input %q: f32[4, 256]\n"
      " %h: f32[4, 4, 64] = reshape [s=4, i=4, j=64] %q(s, 64*i + j) -> (s, i, j)");
  auto major = derive_placements(g, 0, mesh("2"), OpStrategy({1}));
  ASSERT_TRUE(major.ok()) << major.error().to_string();
  EXPECT_EQ(major->inputs[0].sharding.to_string(), "[Shard(1)]");
  EXPECT_FALSE(major->inputs[0].has_halo());
  EXPECT_EQ(major->results[0].sharding.to_string(), "[Shard(1)]");
  // Splitting j: device 0 reads columns [0:224) (strided, fetched as their hull), 96 beyond its
  // block [0:128); device 1 reads [32:256), 96 below its block.
  auto minor = derive_placements(g, 0, mesh("2"), OpStrategy({2}));
  ASSERT_TRUE(minor.ok()) << minor.error().to_string();
  EXPECT_EQ(minor->inputs[0].sharding.to_string(), "[Shard(1)]");
  EXPECT_EQ(minor->inputs[0].halo_lo, (IVec{0, 96}));
  EXPECT_EQ(minor->inputs[0].halo_hi, (IVec{0, 96}));
  EXPECT_EQ(minor->results[0].sharding.to_string(), "[Shard(2)]");
}

TEST(Strategy, SoftmaxRowLivesInTheWindow) {
  Graph g = parse(
      "input %x: f32[8, 10]\n"
      " %y: f32[8, 10] = softmax{axis=1} [m=8] %x(m, 0)[1, 10] -> (m, 0)[1, 10]");
  auto s = enumerate_strategies(g, 0, mesh("2"));
  ASSERT_EQ(s.size(), 2u);  // replicated, or rows split
  EXPECT_EQ(s[1], OpStrategy({0}));
}

TEST(Strategy, SlicesReadAnotherDevicesBlock) {
  Graph g = parse("input %x: f32[16]\n %y: f32[4] = identity [i=4] %x(i + 12) -> (i)");
  auto r = derive_placements(g, 0, mesh("2"), OpStrategy({0}));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  // Device 0 reads [12:14), 2 elements of device 1's block [8:16); device 1 reads inside its own.
  EXPECT_EQ(r->inputs[0].halo_lo, IVec{0});
  EXPECT_EQ(r->inputs[0].halo_hi, IVec{2});
}

TEST(Strategy, AResultReachingTwoTensorDimsCannotBeSplit) {
  IndexSpace space({{"i", 4, std::nullopt}, {"t", 3, Monoid::kSum}});
  IndexProjection diag(AffineMap::from_rows(2, {{1, 0}, {1, 0}}, IVec{0, 0}));
  auto r = split_placement(diag, space, 0, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "index dim i reaches tensor dims 0 and 1 of the result, which one block cannot hold");
  EXPECT_EQ(split_placement(diag, space, 0, false)->to_string(), "Shard(0)");
  EXPECT_EQ(split_placement(diag, space, 1, false)->to_string(), "Replicate");
  EXPECT_EQ(split_placement(diag, space, 1, true)->to_string(), "Partial(sum)");
}

// Soundness, box by box: under every enumerated strategy, each device's index box reads no more
// elements beyond its operand blocks than the halos say, and writes exactly its result blocks
// (reduce splits give disjoint reduce ranges along Partial axes).
TEST(Strategy, EnumeratedStrategiesAreSoundOnRandomGraphsAndMeshes) {
  std::mt19937_64 rng(5);
  const char* meshes[] = {"1", "2", "4", "8", "3", "2x2", "2x4", "4x2", "2x2x2", "a=2,b=3"};
  int64_t checked = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Graph g = testing::random_graph(12, seed);
    Mesh m = mesh(meshes[rng() % 10]);
    for (OpId id = 0; id < g.num_ops(); ++id) {
      const Op& op = g.op(id);
      for (const OpStrategy& s : enumerate_strategies(g, id, m)) {
        auto pl = derive_placements(g, id, m, s);
        ASSERT_TRUE(pl.ok());
        for (int64_t dev = 0; dev < m.num_devices(); ++dev) {
          Box idx = s.local_index_box(op.space, m, dev);
          for (size_t k = 0; k < op.inputs.size(); ++k) {
            const OperandSharding& os = pl->inputs[k];
            IVec shape = g.type(op.inputs[k].value).shape();
            Box own = os.sharding.local_box(shape, m, dev);
            Box need = op.inputs[k].proj.image(idx).intersect(Box::of_shape(shape));
            if (need.empty()) continue;
            for (int64_t d = 0; d < shape.size(); ++d) {  // elements read beyond the block
              int64_t lo = need.start()[d], hi = need.end()[d];
              int64_t below = std::max<int64_t>(std::min(own.start()[d], hi) - lo, 0);
              int64_t above = std::max<int64_t>(hi - std::max(own.end()[d], lo), 0);
              EXPECT_LE(below, os.halo_lo[d]) << s.to_string(op.space, m) << " dev " << dev;
              EXPECT_LE(above, os.halo_hi[d]) << s.to_string(op.space, m) << " dev " << dev;
            }
          }
          const OperandSharding& rs = pl->results[0];
          IVec shape = g.type(op.results[0].value).shape();
          Box wrote = op.results[0].proj.image(idx), block = rs.sharding.local_box(shape, m, dev);
          if (!(wrote.empty() && block.empty())) {
            EXPECT_EQ(wrote.to_string(), block.to_string())
                << s.to_string(op.space, m) << " dev " << dev;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// Per-stage sub-meshes: `meshes=DPxTP/..` round-trips, implies pp, sums its devices, and bad forms
// name the rule and what would be valid.
TEST(StrategySpec, PerStageMeshesParseRoundTripAndRefuseBadForms) {
  auto s = StrategySpec::parse("meshes=2x4/4x2,microbatches=8,zero=1,layers=10/14");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(*s->pp, 2);
  EXPECT_TRUE(s->heterogeneous());
  EXPECT_EQ(s->devices(), 16);
  EXPECT_EQ(s->to_string(), "pp=2,meshes=2x4/4x2,zero=1,microbatches=8,layers=10/14");
  auto back = StrategySpec::parse(s->to_string());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_string(), s->to_string());
  EXPECT_EQ(back->meshes, s->meshes);
  EXPECT_FALSE(s->mesh(16).ok());  // no single mesh
  auto eq = StrategySpec::parse("pp=2,meshes=2x2/2x2");
  ASSERT_TRUE(eq.ok());
  EXPECT_FALSE(eq->heterogeneous());
  ASSERT_TRUE(eq->mesh(8).ok());
  EXPECT_EQ(eq->mesh(8)->to_string(), StrategySpec::parse("dp=2,tp=2,pp=2")->mesh(8)->to_string());
  // Equal sub-meshes collapse to the dp/tp form; different ones stay as they are.
  EXPECT_EQ(eq->without_equal_meshes().to_string(), "dp=2,tp=2,pp=2");
  EXPECT_TRUE(eq->without_equal_meshes().meshes.empty());
  EXPECT_EQ(s->without_equal_meshes().to_string(), s->to_string());
  auto err = [](const char* text) {
    auto r = StrategySpec::parse(text);
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(err("meshes=2x4/4").find("one DPxTP sub-mesh per pipeline stage"), std::string::npos);
  EXPECT_NE(err("meshes=0x4/4x2").find("each degree >= 1"), std::string::npos);
  EXPECT_NE(err("pp=3,meshes=2x4/4x2").find("gives 2 stage(s) but pp=3"), std::string::npos);
  EXPECT_NE(err("dp=2,meshes=2x4/4x2").find("drop dp= and tp="), std::string::npos);
  EXPECT_NE(err("ep=2,meshes=2x4/4x2").find("drop ep="), std::string::npos);
}

}  // namespace
}  // namespace heddle

namespace heddle {
namespace {

// Schedule and recomputation are typed from the parse on; the text form reads back.
TEST(StrategySpec, ScheduleAndRecomputeAreTypedValues) {
  auto s = StrategySpec::parse("pp=2,schedule=interleaved,recompute=selective");
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->schedule, (pipeline::PipelineSchedule{pipeline::ScheduleKind::kInterleaved, 2}));
  EXPECT_EQ(s->recompute, Recompute::kSelective);
  EXPECT_EQ(s->to_string(), "pp=2,schedule=interleaved:2,recompute=selective");
  EXPECT_EQ(StrategySpec::parse(s->to_string())->to_string(), s->to_string());
  EXPECT_EQ(StrategySpec::parse("recompute=some").error().message,
            "unknown recompute 'some'; known: none, selective, full");
  EXPECT_EQ(StrategySpec::parse("schedule=interleaved:0").error().message,
            "schedule 'interleaved:0': write interleaved:V with V the number of model chunks per "
            "stage, 1 to 64 (e.g. interleaved:2)");
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_EQ(*parse_recompute(to_string(r)), r);
}

MicroBatching batching(const char* strategy, int64_t batch, bool rebuildable = true) {
  auto s = StrategySpec::parse(strategy);
  EXPECT_TRUE(s.ok()) << strategy;
  auto b = s->micro_batching(batch, rebuildable);
  EXPECT_TRUE(b.ok()) << strategy << ": " << b.error().to_string();
  return b.ok() ? *b : MicroBatching{0, 0};
}

std::string batching_error(const char* strategy, int64_t batch) {
  auto b = StrategySpec::parse(strategy)->micro_batching(batch, true);
  return b.ok() ? "ok" : b.error().message;
}

// The one micro-batch policy simulate, plan and run share.
TEST(StrategySpec, MicroBatchPolicy) {
  EXPECT_EQ(batching("dp=2", 8), (MicroBatching{4, 1}));              // no pipeline: one
  EXPECT_EQ(batching("dp=2,pp=2", 8), (MicroBatching{1, 4}));         // one sequence per replica
  EXPECT_EQ(batching("dp=2,pp=2", 8, false), (MicroBatching{4, 1}));  // a fixed graph: one
  EXPECT_EQ(batching("dp=2,pp=2,mb=2", 8), (MicroBatching{2, 2}));
  EXPECT_EQ(batching("dp=2,pp=2,microbatches=2", 8), (MicroBatching{2, 2}));
  EXPECT_EQ(batching("pp=2,mb=2,microbatches=4", 8), (MicroBatching{2, 4}));
  EXPECT_EQ(batching("pp=2,meshes=2x1/2x1", 8), (MicroBatching{1, 4}));  // equal stages
  EXPECT_EQ(batching("meshes=2x1/1x2", 8), (MicroBatching{1, 4}));  // B / lcm(dp) micro-batches
  EXPECT_EQ(batching_error("dp=3,pp=2", 8), "the batch 8 is not divisible by dp=3");
  EXPECT_EQ(batching_error("dp=2,pp=2,mb=3", 8),
            "the per-replica batch 4 (batch 8 / dp 2) is not divisible by the micro-batch mb=3");
  EXPECT_EQ(batching_error("pp=2,mb=2,microbatches=2", 8),
            "mb=2 gives 4 micro-batches, not microbatches=2");
  EXPECT_EQ(batching_error("dp=2,pp=2,microbatches=3", 8),
            "the per-replica batch 4 is not divisible by microbatches=3");
  EXPECT_NE(batching_error("meshes=2x1/1x2,mb=1", 8).find("give microbatches=M"),
            std::string::npos);
}

}  // namespace
}  // namespace heddle
