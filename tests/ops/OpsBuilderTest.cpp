// The op builders: signatures as DESIGN.md states them (checked against the hand-written examples
// and as text), every built op passes verify(), and bad configurations give diagnostics naming
// the op, the field and the constraint.
#include <gtest/gtest.h>

#include <cstdlib>

#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

std::string source_dir() { return HEDDLE_SOURCE_DIR; }

// Same op up to dim names: kind, extents, reduce flags, projections, padding.
void expect_same_signature(const Op& a, const Op& b) {
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.space.rank(), b.space.rank()) << a.space.to_string() << " vs " << b.space.to_string();
  for (int64_t i = 0; i < a.space.rank(); ++i) {
    EXPECT_EQ(a.space.dim(i).extent, b.space.dim(i).extent);
    EXPECT_EQ(a.space.dim(i).reduce, b.space.dim(i).reduce);
  }
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].proj, b.inputs[i].proj)
        << a.inputs[i].proj.to_string() << " vs " << b.inputs[i].proj.to_string();
    EXPECT_EQ(a.inputs[i].padded, b.inputs[i].padded);
  }
  ASSERT_EQ(a.results.size(), b.results.size());
  for (size_t i = 0; i < a.results.size(); ++i) EXPECT_EQ(a.results[i].proj, b.results[i].proj);
}

TEST(OpsBuilder, MlpMatchesTheHandWrittenExample) {
  auto parsed = parse_graph_file(source_dir() + "/examples/mlp.hd");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  Graph g("mlp");
  Ops ops(g);
  ValueId x = ops.input("x", f32({64, 784}));
  ValueId labels = ops.input("labels", i64({64}));
  ValueId w1 = ops.param("w1", f32({784, 512})), b1 = ops.param("b1", f32({512}));
  ValueId w2 = ops.param("w2", f32({512, 512})), b2 = ops.param("b2", f32({512}));
  ValueId w3 = ops.param("w3", f32({512, 10}));
  ValueId a1 = ops.relu(ops.add(ops.einsum("mk,kn->mn", x, w1), b1));
  ValueId a2 = ops.relu(ops.add(ops.einsum("mk,kn->mn", a1, w2), b2));
  ValueId ce = ops.cross_entropy(ops.einsum("mk,kn->mn", a2, w3), labels);
  ops.output(ops.reduce(OpKind::kReduceMean, ce, {0}));
  ASSERT_TRUE(ops.ok());
  EXPECT_TRUE(verify(g).empty());
  ASSERT_EQ(g.num_ops(), parsed->num_ops());
  for (OpId i = 0; i < g.num_ops(); ++i) expect_same_signature(g.op(i), parsed->op(i));
}

TEST(OpsBuilder, ConvnetMatchesTheHandWrittenExample) {
  auto parsed = parse_graph_file(source_dir() + "/examples/convnet.hd");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  Graph g("convnet");
  Ops ops(g);
  ValueId img = ops.input("img", f32({8, 3, 32, 32}));
  ValueId labels = ops.input("labels", i64({8}));
  ValueId k1 = ops.param("k1", f32({16, 3, 3, 3}));
  ValueId fc = ops.param("fc", f32({16, 10}));
  Conv2dOptions co;
  co.stride = {2, 2};
  co.padding = {1, 1};
  ValueId r1 = ops.relu(ops.conv2d(img, k1, co));
  ValueId p1 = ops.maxpool2d(r1, {{3, 3}, {2, 2}, {1, 1}});
  ValueId gp = ops.global_avgpool(p1);
  ValueId ce = ops.cross_entropy(ops.einsum("nc,ck->nk", gp, fc), labels);
  ops.output(ops.reduce(OpKind::kReduceMean, ce, {0}));
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  EXPECT_TRUE(verify(g).empty());
  ASSERT_EQ(g.num_ops(), parsed->num_ops());
  for (OpId i = 0; i < 3; ++i) expect_same_signature(g.op(i), parsed->op(i));
  // global_avgpool: reduce dims here, a window in the example; both compute the same mean.
  EXPECT_EQ(g.op(3).space.to_string(), "[n=8, c=16, h=8:sum, w=8:sum]");
  for (OpId i = 4; i < g.num_ops(); ++i) expect_same_signature(g.op(i), parsed->op(i));
}

TEST(OpsBuilder, SignaturesAsText) {
  Graph g;
  Ops ops(g);
  ValueId q = ops.input("q", f32({2, 128, 256}));
  ValueId qh = ops.reshape(q, {2, 128, 4, 64});
  ValueId qt = ops.transpose(qh, {0, 2, 1, 3});
  ValueId e = ops.embedding(ops.input("ids", i64({2, 16})), ops.param("wte", f32({100, 32})));
  ValueId s = ops.softmax(ops.input("s", f32({2, 10})), -1);
  ValueId sl = ops.slice(q, {0, 4, 0}, {2, 8, 256});
  ASSERT_TRUE(ops.ok());
  ASSERT_TRUE(verify(g).empty()) << verify(g).front().to_string();
  auto line = [&](ValueId v) { return print_op(g, g.value(v).producer); };
  EXPECT_NE(line(qh).find("[f0=2, f1=128, f2=4, f3=64] %q(f0, f1, 64*f2 + f3) -> (f0, f1, f2, f3)"),
            std::string::npos)
      << line(qh);
  EXPECT_NE(line(qt).find("%t0(d0, d2, d1, d3) -> (d0, d1, d2, d3)"), std::string::npos)
      << line(qt);
  EXPECT_NE(line(e).find("[i0=2, i1=16, v=100:sum, h=32] %ids(i0, i1), %wte(v, h) -> (i0, i1, h)"),
            std::string::npos)
      << line(e);
  EXPECT_NE(line(s).find("[d0=2] %s(d0, 0)[1, 10] -> (d0, 0)[1, 10]"), std::string::npos)
      << line(s);
  EXPECT_NE(line(sl).find("%q(d0, d1 + 4, d2)"), std::string::npos) << line(sl);
}

TEST(OpsBuilder, EveryBuilderVerifies) {
  Graph g;
  Ops ops(g);
  ValueId x = ops.input("x", f32({2, 8, 4, 16}));
  ValueId h = ops.reshape(x, {2, 8, 64});
  ValueId gm = ops.param("g", f32({64})), bt = ops.param("b", f32({64}));
  ValueId y = ops.layernorm(h, gm, bt);
  y = ops.rmsnorm(y, gm);
  y = ops.activation("gelu_tanh", y);
  y = ops.reduce(OpKind::kReduceMean, y, {1}, true);
  y = ops.rotary(x, 10000.0);
  y = ops.causal_mask(ops.einsum("bshd,bthd->bhst", y, x));
  y = ops.log_softmax(y);
  ValueId c = ops.concat({x, x}, 2);
  ValueId br = ops.broadcast(gm, {3, 64});
  Conv2dOptions co;
  co.groups = 2;
  co.dilation = {2, 1};
  co.padding = {1, 0, 2, 1};
  ValueId img = ops.input("img", f32({1, 4, 9, 9}));
  ValueId cv = ops.conv2d(img, ops.param("k", f32({6, 2, 3, 3})), co);
  ValueId ap = ops.avgpool2d(cv, {{2, 2}, {}, {0, 0}});
  ValueId top = ops.topk_gating(ops.softmax(ops.input("gl", f32({6, 4}))), 2, 3).at(1);
  for (ValueId v : {y, c, br, ap, top}) ops.output(v);
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  auto d = verify(g);
  EXPECT_TRUE(d.empty()) << d.front().to_string();
}

struct BadCase {
  std::string what;
  std::function<void(Ops&)> build;
  std::vector<std::string> expect;  // substrings of the message
};

TEST(OpsBuilder, BadConfigurationsNameOpFieldAndConstraint) {
  std::vector<BadCase> cases = {
      {"negative stride",
       [](Ops& o) {
         Conv2dOptions c;
         c.stride = {-1, 1};
         o.conv2d(o.input("x", f32({1, 3, 8, 8})), o.param("w", f32({4, 3, 3, 3})), c);
       },
       {"conv2d", "'stride'", "positive", "-1"}},
      {"kernel larger than padded input",
       [](Ops& o) {
         Conv2dOptions c;
         c.padding = {1, 1};
         o.conv2d(o.input("x", f32({1, 3, 4, 4})), o.param("w", f32({4, 3, 7, 7})), c);
       },
       {"conv2d", "kernel", "larger than the padded input 6"}},
      {"groups",
       [](Ops& o) {
         Conv2dOptions c;
         c.groups = 2;
         o.conv2d(o.input("x", f32({1, 3, 8, 8})), o.param("w", f32({4, 1, 3, 3})), c);
       },
       {"conv2d", "'groups'", "divide"}},
      {"pool kernel",
       [](Ops& o) {
         o.maxpool2d(o.input("x", f32({1, 1, 2, 2})), {{3, 3}, {}, {0, 0}});
       },
       {"maxpool2d", "kernel 3", "larger"}},
      {"unknown activation",
       [](Ops& o) { o.activation("swish2", o.input("x", f32({2}))); },
       {"activation", "'activation'", "swish2"}},
      {"einsum mismatch",
       [](Ops& o) {
         o.einsum("mk,kn->mn", o.input("a", f32({2, 3})), o.input("b", f32({4, 5})));
       },
       {"einsum 'mk,kn->mn'", "dim 'k'", "3", "4"}},
      {"einsum repeat",
       [](Ops& o) {
         o.einsum("ii->i", o.input("a", f32({2, 2})));
       },
       {"einsum", "distinct"}},
      {"reshape count",
       [](Ops& o) {
         o.reshape(o.input("a", f32({2, 3})), {4, 2});
       },
       {"reshape", "6 elements", "8"}},
      {"broadcast",
       [](Ops& o) {
         o.add(o.input("a", f32({2, 3})), o.input("b", f32({4})));
       },
       {"add", "do not broadcast"}},
      {"layernorm gain",
       [](Ops& o) {
         o.layernorm(o.input("a", f32({2, 8})), o.param("g", f32({4})), o.param("b", f32({4})));
       },
       {"layernorm", "must be [8]"}},
      {"rotary odd",
       [](Ops& o) {
         o.rotary(o.input("a", f32({1, 2, 3, 5})));
       },
       {"rotary", "even"}},
      {"slice", [](Ops& o) { o.slice(o.input("a", f32({4})), {2}, {9}); }, {"slice", "<= 4"}},
      {"transpose",
       [](Ops& o) {
         o.transpose(o.input("a", f32({4, 2})), {0, 0});
       },
       {"transpose", "'perm'", "permutation"}},
      {"labels",
       [](Ops& o) {
         o.cross_entropy(o.input("l", f32({2, 5})), o.input("y", i64({3})));
       },
       {"cross_entropy", "labels"}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    Ops ops(g);
    c.build(ops);
    ASSERT_FALSE(ops.ok());
    std::string msg = ops.status().error().message;
    for (const auto& e : c.expect) EXPECT_NE(msg.find(e), std::string::npos) << msg;
  }
}

TEST(OpsBuilder, FirstErrorPoisonsLaterOps) {
  Graph g;
  Ops ops(g);
  ValueId a = ops.input("a", f32({2, 3}));
  ValueId bad = ops.reshape(a, {7});
  EXPECT_EQ(bad, kNoValue);
  EXPECT_EQ(ops.relu(bad), kNoValue);
  EXPECT_EQ(ops.add(a, ops.transpose(a, {0})), kNoValue);
  EXPECT_NE(ops.status().error().message.find("reshape"), std::string::npos);
  EXPECT_EQ(g.num_ops(), 0);
}

}  // namespace
}  // namespace heddle
