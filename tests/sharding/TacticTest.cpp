// Declarative tactics per value and op (UserTactics.h) and the report of what a plan leaves
// unsplit (SplitReport.h): parsing, conflicts with both sources, pins propagation honours, and
// the reasons the report gives.
#include <gtest/gtest.h>

#include "heddle/ir/TextParser.h"
#include "heddle/sharding/SplitReport.h"
#include "heddle/sharding/Tactics.h"
#include "heddle/sharding/UserTactics.h"

namespace heddle {
namespace {

Mesh mesh(const char* text) { return *Mesh::parse(text); }

Graph parse(const std::string& body, const std::string& file = "t.hd") {
  auto g = parse_graph("graph g {\n" + body + "\n}\n", file);
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return std::move(*g);
}

Tactic tactic(const char* text) {
  auto t = Tactic::parse(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.error().message;
  return *t;
}

// An NCHW batch-norm: channels are tensor dim 1, where the presets see a sequence.
const char* kBatchNorm =
    "input %img: f32[8, 16, 16, 16]\n param %gain: f32[16]\n"
    " %mean: f32[16] = reduce_mean [c=16, n=8:sum, h=16:sum, w=16:sum] %img(n, c, h, w) -> (c)\n"
    " %xc: f32[8, 16, 16, 16] = sub [n=8, c=16, h=16, w=16] %img(n, c, h, w), %mean(c) -> (n, c, "
    "h, w)\n"
    " %y: f32[8, 16, 16, 16] = mul [n=8, c=16, h=16, w=16] %xc(n, c, h, w), %gain(c) -> (n, c, "
    "h, w)\n output %y";

// A stencil written as an index sum: y(i) = sum_t x(i + t).
const char* kStencilSum =
    "input %x: f32[66]\n"
    " %y: f32[64] = reduce_sum [i=64, t=3:sum] %x(i + t) -> (i)\n output %y";

TEST(Tactic, ParsesTheCommandLineFormsAndPrintsThemBack) {
  for (const char* text : {"%w:1=tp", "%x=replicate", "%h:n=tp", "%\"a/b:0\":0=dp"}) {
    auto t = Tactic::parse(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.error().message;
    EXPECT_EQ(t->to_string(), text);
    EXPECT_EQ(t->source, std::string("--tactic '") + text + "'");
  }
  EXPECT_EQ(tactic("%w:1=tp").kind, Tactic::Kind::kShardValue);
  EXPECT_EQ(tactic("%h:n=tp").kind, Tactic::Kind::kSplitOp);
  EXPECT_EQ(tactic("%h:n=tp").index_dim, "n");
  EXPECT_EQ(tactic("%x=replicate").kind, Tactic::Kind::kReplicateValue);
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"w:1=tp", "expected a value name starting with '%'"},
        Bad{"%w:1", "expected '=' and a mesh axis"},
        Bad{"%w=tp", "names no dim: did you mean %w:0=tp?"}, Bad{"%w:1=", "expected a mesh axis"},
        Bad{"%w:1=replicate", "replicate applies to a whole value"},
        Bad{"%w:1=t p", "is not a name"}}) {
    auto t = Tactic::parse(b.text);
    ASSERT_FALSE(t.ok()) << b.text;
    EXPECT_NE(t.error().message.find(b.says), std::string::npos) << t.error().message;
  }
}

TEST(Tactic, AnnotationsInTheTextFormBecomeTacticsWithTheirLines) {
  Graph g = parse(
      "input %x: f32[8, 4] shard{0=dp}\n param %w: f32[4, 6] replicate\n"
      " %h: f32[8, 6] shard{1=tp} = einsum{spec=\"mk,kn->mn\"} [m=8, n=6, k=4:sum] %x(m, k), "
      "%w(k, n) -> (m, n) split{n=tp}\n output %h");
  std::vector<std::string> got;
  for (const Tactic& t : graph_tactics(g)) got.push_back(t.to_string() + " @ " + t.source);
  EXPECT_EQ(got, (std::vector<std::string>{"%x:0=dp @ t.hd:2", "%w=replicate @ t.hd:3",
                                           "%h:1=tp @ t.hd:4", "%h:n=tp @ t.hd:4"}));
}

TEST(Tactic, ConflictsNameBothSources) {
  Graph g = parse(
      "input %x: f32[8, 4] shard{1=tp}\n param %w: f32[4, 6]\n"
      " %h: f32[8, 6] = einsum{spec=\"mk,kn->mn\"} [m=8, n=6, k=4:sum] %x(m, k), "
      "%w(k, n) -> (m, n)\n output %h");
  Mesh m = mesh("dp=2,tp=2");
  std::vector<Tactic> ts = graph_tactics(g);
  ts.push_back(tactic("%x=replicate"));
  auto r = apply_tactics(g, m, Pins{}, ts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "conflicting tactics for %x on mesh axis tp: Shard(1) from t.hd:2, but Replicate from "
            "--tactic '%x=replicate'");
  // Against the preset: dp shards the batch of %x.
  Pins preset;
  preset.values[0] = TensorSharding::replicated(2).with(0, Placement::shard(0));
  auto p = apply_tactics(g, m, preset, {tactic("%x=replicate")}, "--strategy dp=2,tp=2");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            "conflicting tactics for %x on mesh axis dp: Shard(0) from --strategy dp=2,tp=2, but "
            "Replicate from --tactic '%x=replicate'");
  // An op's split against its result's pin.
  auto q = apply_tactics(g, m, Pins{}, {tactic("%h:m=tp"), tactic("%h:1=tp")});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().message,
            "conflicting tactics for %h on mesh axis tp: a split of index dim m gives Shard(0) "
            "from --tactic '%h:m=tp', but Shard(1) from --tactic '%h:1=tp'");
}

TEST(Tactic, UnknownNamesListWhatExists) {
  Graph g = parse(kBatchNorm);
  Mesh m = mesh("tp=4");
  auto bad = [&](const char* text) {
    auto r = apply_tactics(g, m, Pins{}, {tactic(text)});
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_EQ(bad("%nope:0=tp"), "--tactic '%nope:0=tp': %nope is not a value of g");
  EXPECT_EQ(bad("%img:1=dp"), "--tactic '%img:1=dp': the mesh tp=4 has no axis 'dp'; its axes: tp");
  EXPECT_EQ(bad("%img:4=tp"),
            "--tactic '%img:4=tp': %img f32[8, 16, 16, 16] has no tensor dim 4 (it has 4)");
  EXPECT_EQ(bad("%img:c=tp"),
            "--tactic '%img:c=tp': %img is a graph input, which no op defines; pin its placement "
            "with %img:TENSOR_DIM=AXIS");
  EXPECT_NE(bad("%y:q=tp").find("has no index dim 'q'; its index space: [n=8, c=16, h=16, w=16]"),
            std::string::npos);
}

TEST(Tactic, AValuePinSplitsTheChannelsThePresetCannot) {
  Graph g = parse(kBatchNorm);
  Mesh m = mesh("tp=4");
  StrategySpec spec = *StrategySpec::parse("tp=4");
  // The preset: tp may split only model dims; the channels look like a sequence, so h is split.
  auto preset = plan_from_strategy(g, m, spec);
  ASSERT_TRUE(preset.ok()) << preset.error().message;
  EXPECT_EQ(preset->plan.ops[2].to_string(g.op(2).space, m), "{tp: h}");
  // The tactic: the channels of %img on tp; propagation carries the split through every op.
  auto pins = apply_tactics(g, m, *tactic_pins(g, m, spec), {tactic("%img:1=tp")});
  ASSERT_TRUE(pins.ok()) << pins.error().message;
  auto p = plan_from_pins(g, m, *pins);
  ASSERT_TRUE(p.ok()) << p.error().message;
  for (OpId i = 0; i < g.num_ops(); ++i)
    EXPECT_EQ(p->plan.ops[i].to_string(g.op(i).space, m), "{tp: c}") << i;
  EXPECT_TRUE(p->reshards.empty()) << p->report(g);
  EXPECT_EQ(p->plan.pinned.at(0).to_string(), "[Shard(1)]");
}

TEST(Tactic, AnOpPinFixesOneAxisAndLeavesTheOthersToPropagation) {
  Graph g = parse(kBatchNorm);
  Mesh m = mesh("a=2,b=2");
  auto pins = apply_tactics(g, m, Pins{}, {tactic("%y:w=b")});
  ASSERT_TRUE(pins.ok()) << pins.error().message;
  auto p = propagate(g, m, *pins);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->plan.ops[2].dim(1), 3);  // b splits w, as pinned
  EXPECT_GE(p->plan.ops[2].dim(0), 0);  // a: propagation's choice
  // The stencil's index sum splits (a halo of 2 past each block); a split the sharding layer
  // refuses names the tactic and the reason: reduce dim t=3 on 4 devices leaves one without a part.
  Graph s = parse(kStencilSum);
  EXPECT_TRUE(apply_tactics(s, mesh("b=4"), Pins{}, {tactic("%y:i=b")}).ok());
  auto bad = apply_tactics(s, mesh("b=4"), Pins{}, {tactic("%y:t=b")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--tactic '%y:t=b': op 'reduce_sum' defining %y"),
            std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("leaves some devices no part of it"), std::string::npos)
      << bad.error().message;
}

TEST(SplitReport, SaysWhyEachDimStaysWhole) {
  Graph g = parse(kStencilSum);
  // i could split (64 by 4, a halo of 2): alone on its mesh, the op is too small to pay for the
  // fetch, so the reason is propagation's cost; t=3 cannot give each of 4 devices a part.
  Mesh m = mesh("tp=4");
  auto p = propagate(g, m, Pins{});
  ASSERT_TRUE(p.ok());
  SplitReport r = split_report(g, Pins{}, p->plan);
  ASSERT_EQ(r.idle_axes, (std::vector<int64_t>{0}));
  ASSERT_EQ(r.unsplit.size(), 1u);
  ASSERT_EQ(r.unsplit[0].dims.size(), 2u);
  EXPECT_EQ(r.unsplit[0].dims[0].reason, NoSplit::kCost);
  EXPECT_EQ(r.unsplit[0].dims[1].reason, NoSplit::kDivisibility);
  EXPECT_NE(r.unsplit[0].dims[1].detail.find("leaves some devices no part of it"),
            std::string::npos);
  EXPECT_TRUE(r.unsplit[0].could_split());
  EXPECT_EQ(r.replicated_ops, 1);
  EXPECT_NE(r.to_string(g, m).find("mesh axis tp=4 splits no op\n"), std::string::npos);
  // On a mesh of 3, uneven blocks (22, 22, 20) make splitting i pay: nothing stays whole.
  Mesh three = mesh("3");
  auto q = propagate(g, three, Pins{});
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(split_report(g, Pins{}, q->plan).unsplit.empty());
}

TEST(SplitReport, ThePresetsIdleAxisErrorNamesTheRealCause) {
  Graph g = parse(kStencilSum);
  Mesh m = mesh("tp=4");
  auto p = plan_from_strategy(g, m, *StrategySpec::parse("tp=4"));
  ASSERT_FALSE(p.ok());
  const std::string& msg = p.error().message;
  EXPECT_EQ(msg.find("divides none"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tp=4 splits no op of g: not for divisibility: op 'reduce_sum' defining %y"),
            std::string::npos)
      << msg;
}

TEST(SplitReport, RolesAreReportedAsRoles) {
  // Both dims come from the input's batch and sequence: tp may split neither.
  Graph g = parse(
      "input %x: f32[8, 4]\n %y: f32[8, 4] = relu [n=8, s=4] %x(n, s) -> (n, s)\n"
      " output %y");
  Mesh m = mesh("tp=2");
  auto pins = tactic_pins(g, m, *StrategySpec::parse("tp=2"));
  ASSERT_TRUE(pins.ok());
  auto p = propagate(g, m, *pins);
  ASSERT_TRUE(p.ok());
  SplitReport r = split_report(g, *pins, p->plan);
  ASSERT_EQ(r.unsplit.size(), 1u);
  EXPECT_TRUE(r.unsplit[0].could_split());
  for (const DimVerdict& d : r.unsplit[0].dims) EXPECT_EQ(d.reason, NoSplit::kRole) << d.detail;
  EXPECT_EQ(unsplit_text(g, m, r.unsplit[0]),
            "op 'relu' defining %y [n=8, s=4] not split on tp=2: n (role): valid, but tp may split "
            "only model dims: neither the batch (dim 0) nor the sequence (dim 1) of the graph "
            "inputs (pin it with --tactic); s (role): valid, but tp may split only model dims: "
            "neither the batch (dim 0) nor the sequence (dim 1) of the graph inputs (pin it with "
            "--tactic)");
  // The tactic lifts the role on the dims it reaches.
  auto pinned = apply_tactics(g, m, *pins, {tactic("%x:1=tp")});
  ASSERT_TRUE(pinned.ok());
  auto q = propagate(g, m, *pinned);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->plan.ops[0].to_string(g.op(0).space, m), "{tp: s}");
}

}  // namespace
}  // namespace heddle
