// Autodiff: every differentiable op's gradient against central finite differences of the
// interpreter's loss; backward graphs verify; training steps lower the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "OpsTestUtil.h"
#include "common/TrainStepUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle {
namespace {

struct GradCase {
  std::string name;
  std::function<ValueId(Ops&)> body;  // builds params/inputs and returns the op's output
  double lo = -2, hi = 2;             // param value range
  bool weighted = true;               // loss = sum(y * R) with a random R; else y is the loss
};

// Runs the finite-difference check of `c`.
void check(const GradCase& c, std::mt19937& rng) {
  SCOPED_TRACE(c.name);
  Graph g("grad_" + c.name);
  Ops ops(g);
  ValueId y = c.body(ops);
  ValueId loss = y;
  if (c.weighted) {
    ValueId r = ops.input("r", TensorType(DType::kF32, ops.shape(y)));
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < ops.shape(y).size(); ++i) axes.push_back(i);
    loss = ops.reduce(OpKind::kReduceSum, ops.mul(y, r), axes);
  }
  ops.output(loss);
  ASSERT_TRUE(ops.ok()) << ops.status().error().message;
  testing::check_gradients(g, loss, c.lo, c.hi, rng);
}

std::vector<GradCase> cases() {
  std::vector<GradCase> cs;
  auto P = [](Ops& o, const char* n, std::vector<int64_t> s) {
    return o.param(n, f32(std::move(s)));
  };
  for (OpKind k : {OpKind::kRelu, OpKind::kGelu, OpKind::kGeluTanh, OpKind::kSilu, OpKind::kSigmoid,
                   OpKind::kTanh, OpKind::kExp, OpKind::kNeg, OpKind::kAbs, OpKind::kSquare,
                   OpKind::kScale, OpKind::kCast, OpKind::kIdentity})
    cs.push_back({std::string(op_kind_name(k)), [=](Ops& o) {
                    Attrs a;
                    if (k == OpKind::kScale) a = {{"alpha", -1.5}};
                    return o.unary(k, P(o, "x", {3, 4}), a);
                  }});
  for (OpKind k : {OpKind::kLog, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kReciprocal})
    cs.push_back({std::string(op_kind_name(k)),
                  [=](Ops& o) {
                    return o.unary(k, P(o, "x", {3, 4}));
                  },
                  0.5, 2});
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kMaximum, OpKind::kMinimum})
    cs.push_back({std::string(op_kind_name(k)), [=](Ops& o) {
                    return o.binary(k, P(o, "a", {3, 4}), P(o, "b", {4}));
                  }});
  for (OpKind k : {OpKind::kDiv, OpKind::kPow})
    cs.push_back({std::string(op_kind_name(k)),
                  [=](Ops& o) {
                    return o.binary(k, P(o, "a", {3, 1}), P(o, "b", {3, 4}));
                  },
                  0.5, 2});
  cs.push_back({"where", [=](Ops& o) {
                  ValueId c = o.input("c", TensorType(DType::kBool, IVec{3, 4}));
                  return o.where(c, P(o, "a", {3, 4}), P(o, "b", {4}));
                }});
  for (OpKind k : {OpKind::kReduceSum, OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceMin})
    cs.push_back({std::string(op_kind_name(k)), [=](Ops& o) {
                    return o.reduce(k, P(o, "x", {3, 4, 5}), {0, 2});
                  }});
  cs.push_back({"softmax", [=](Ops& o) { return o.softmax(P(o, "x", {2, 5, 3}), 1); }});
  cs.push_back({"log_softmax", [=](Ops& o) { return o.log_softmax(P(o, "x", {2, 3, 5})); }});
  cs.push_back({"causal_mask", [=](Ops& o) {
                  return o.softmax(o.causal_mask(P(o, "x", {2, 4, 4})));
                }});
  cs.push_back({"layernorm", [=](Ops& o) {
                  return o.layernorm(P(o, "x", {2, 3, 6}), P(o, "gamma", {6}), P(o, "beta", {6}));
                }});
  cs.push_back({"rmsnorm", [=](Ops& o) {
                  return o.rmsnorm(P(o, "x", {2, 3, 6}), P(o, "gamma", {6}));
                }});
  cs.push_back({"cross_entropy",
                [=](Ops& o) {
                  ValueId l = o.cross_entropy(P(o, "logits", {2, 3, 5}), o.input("y", i64({2, 3})));
                  return o.reduce(OpKind::kReduceMean, l, {0, 1});
                },
                -2, 2, false});
  cs.push_back({"embedding", [=](Ops& o) {
                  return o.embedding(o.input("ids", i64({2, 3})), P(o, "table", {5, 4}));
                }});
  for (std::string spec :
       {"mk,kn->mn", "km,nk->nm", "bmk,bkn->bmn", "bqhd,bkhd->bhqk", "ij->ji", "ijk->i"})
    cs.push_back({"einsum " + spec, [=](Ops& o) {
                    auto arrow = spec.find("->");
                    std::string lhs = spec.substr(0, arrow);
                    auto comma = lhs.find(',');
                    auto shape = [](const std::string& t) {
                      std::vector<int64_t> s;
                      for (char c : t) s.push_back(2 + (c % 3));
                      return s;
                    };
                    ValueId a = P(o, "a", shape(lhs.substr(0, comma)));
                    ValueId b = comma == std::string::npos
                                    ? kNoValue
                                    : P(o, "b", shape(lhs.substr(comma + 1)));
                    return o.einsum(spec, a, b);
                  }});
  for (int v = 0; v < 3; ++v)
    cs.push_back({"conv2d v" + std::to_string(v), [=](Ops& o) {
                    Conv2dOptions c;
                    c.stride = {v == 1 ? 2 : 1, 1};
                    c.padding = v == 0 ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{1, 1};
                    c.dilation = {v == 2 ? 2 : 1, 1};
                    c.groups = v == 2 ? 2 : 1;
                    return o.conv2d(P(o, "x", {1, 2, 6, 5}), P(o, "w", {4, 2 / c.groups, 3, 2}), c);
                  }});
  cs.push_back({"maxpool2d", [=](Ops& o) {
                  return o.maxpool2d(P(o, "x", {1, 2, 5, 5}), {{3, 3}, {2, 2}, {1, 1}});
                }});
  cs.push_back({"avgpool2d", [=](Ops& o) {
                  return o.avgpool2d(P(o, "x", {1, 2, 5, 6}), {{2, 3}, {1, 2}, {1, 1}});
                }});
  cs.push_back({"global_avgpool", [=](Ops& o) {
                  return o.global_avgpool(P(o, "x", {2, 3, 3, 2}));
                }});
  cs.push_back({"reshape", [=](Ops& o) { return o.reshape(P(o, "x", {2, 6}), {3, 2, 2}); }});
  cs.push_back({"reshape window", [=](Ops& o) { return o.reshape(P(o, "x", {6, 4}), {4, 6}); }});
  cs.push_back({"transpose", [=](Ops& o) { return o.transpose(P(o, "x", {2, 3, 4}), {2, 0, 1}); }});
  cs.push_back({"slice", [=](Ops& o) { return o.slice(P(o, "x", {4, 5}), {1, 0}, {3, 4}); }});
  cs.push_back({"concat", [=](Ops& o) {
                  return o.concat({P(o, "a", {2, 3}), P(o, "b", {2, 1}), P(o, "c", {2, 2})}, 1);
                }});
  cs.push_back({"broadcast", [=](Ops& o) { return o.broadcast(P(o, "x", {3, 1}), {2, 3, 4}); }});
  cs.push_back({"rotary", [=](Ops& o) { return o.rotary(P(o, "x", {1, 4, 2, 6}), 50.0); }});
  return cs;
}

TEST(Autodiff, EveryOpMatchesFiniteDifferences) {
  std::mt19937 rng(99);
  for (const auto& c : cases()) check(c, rng);
}

TEST(Autodiff, ZooModelsMatchFiniteDifferences) {
  std::mt19937 rng(5);
  for (const char* name : {"gpt-tiny", "llama-tiny"}) {
    GradCase c{name,
               [name](Ops& o) {
                 zoo::ZooOverrides ov;
                 ov.layers = 1;
                 ov.seq = 6;
                 ov.vocab = 11;
                 ov.hidden = 16;
                 ov.heads = 4;
                 zoo::ModelOptions mo;
                 mo.with_loss = true;
                 auto g = zoo::build_zoo_model(name, ov, mo);
                 o.graph() = std::move(*g);
                 return o.graph().outputs()[0];
               },
               -0.5, 0.5, false};
    check(c, rng);
  }
}

// Issue #23: forms written in the text IR train as the builders' forms do: a conv2d without its
// optional attributes and with its own dim names, a dilated strided padded conv, and
// global_avgpool in the window form of examples/convnet.hd.
TEST(Autodiff, TextFormsMatchFiniteDifferences) {
  const char* head =
      "graph t {\n input %x: f32[2, 2, 7, 7]\n input %r: f32[2, 3]\n param %k: f32[3, 2, 3, 3]\n";
  const char* tail =
      " %m: f32[2, 3] = mul [b=2, c=3] %g(b, c), %r(b, c) -> (b, c)\n"
      " %l: f32[] = reduce_sum [b=2:sum, c=3:sum] %m(b, c) -> ()\n output %l\n}\n";
  const std::string bodies[] = {
      // No optional attribute; dims named b, o, y, z, i.
      " %c: f32[2, 3, 5, 5] = conv2d [b=2, o=3, y=5, z=5, i=2:sum] %x(b, i, y, z)[1, 1, 3, 3], "
      "%k(o, i, 0, 0)[1, 1, 3, 3] -> (b, o, y, z)\n"
      " %g: f32[2, 3] = global_avgpool [b=2, c=3] %c(b, c, 0, 0)[1, 1, 5, 5] -> (b, c)\n",
      // Stride 2, padding 1, dilation 2: the 3x3 kernel reads a 5x5 window.
      " %c: f32[2, 3, 3, 3] = conv2d{dilation=[2, 2], padding=[1, 1], stride=[2, 2]} [n=2, co=3, "
      "oh=3, ow=3, ci=2:sum] %x(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 5, 5] padded, %k(co, ci, 0, "
      "0)[1, 1, 3, 3] -> (n, co, oh, ow)\n"
      " %g: f32[2, 3] = global_avgpool [b=2, c=3] %c(b, c, 0, 0)[1, 1, 3, 3] -> (b, c)\n",
  };
  std::mt19937 rng(23);
  for (const auto& body : bodies) {
    SCOPED_TRACE(body);
    auto g = parse_graph(std::string(head) + body + tail, "t.hd");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    testing::check_gradients(*g, g->outputs()[0], -2, 2, rng);
  }
}

// An einsum that sums a dim only one input reads (i in `ij,jk->k`) verifies, so it trains: that
// input's gradient broadcasts over i (found by the op-form generator: autodiff used to fail with
// "output dim 'i' appears in no operand").
TEST(Autodiff, EinsumSummingADimOfOneInputTrains) {
  auto g = parse_graph(
      "graph t {\n param %a: f32[3, 4]\n param %b: f32[4, 2]\n"
      " %y: f32[2] = einsum{spec=\"ij,jk->k\"} [k=2, i=3:sum, j=4:sum] %a(i, j), %b(j, k) -> (k)\n"
      " %l: f32[] = reduce_sum [k=2:sum] %y(k) -> ()\n output %l\n}\n",
      "t.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  std::mt19937 rng(7);
  testing::check_gradients(*g, g->outputs()[0], -1, 1, rng);
}

// A conv2d with a bias operand trains (issue #23: it verified but had no gradient rule); a bias
// that is not one value per output channel is refused by the verifier, naming the form.
TEST(Autodiff, ConvWithBiasMatchesFiniteDifferences) {
  const std::string head =
      "graph t {\n input %x: f32[2, 2, 5, 5]\n param %k: f32[4, 1, 3, 3]\n param %bias: f32[4]\n";
  const std::string tail =
      " %l: f32[] = reduce_sum [n=2:sum, c=4:sum, h=3:sum, w=3:sum] %c(n, c, h, w) -> ()\n"
      " output %l\n}\n";
  auto g = parse_graph(
      head +
          " %c: f32[2, 4, 3, 3] = conv2d{groups=2} [n=2, g=2, co=2, oh=3, ow=3, ci=1:sum] %x(n, g "
          "+ ci, oh, ow)[1, 1, 3, 3], %k(2*g + co, ci, 0, 0)[1, 1, 3, 3], %bias(2*g + co) -> (n, "
          "2*g + co, oh, ow)\n" +
          tail,
      "t.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  std::mt19937 rng(23);
  testing::check_gradients(*g, g->outputs()[0], -1, 1, rng);
  auto bad = parse_graph(
      head +
          " %c: f32[2, 4, 3, 3] = conv2d{groups=2} [n=2, g=2, co=2, oh=3, ow=3, ci=1:sum] %x(n, g "
          "+ ci, oh, ow)[1, 1, 3, 3], %k(2*g + co, ci, 0, 0)[1, 1, 3, 3], %bias(2*co) -> (n, "
          "2*g + co, oh, ow)\n" +
          tail,
      "t.hd");
  ASSERT_TRUE(bad.ok()) << bad.error().to_string();
  auto d = verify(*bad);
  ASSERT_FALSE(d.empty());
  EXPECT_NE(d.front().message.find("input 2 (%bias): f32[4] (2*co) is not the conv2d bias form [4] "
                                   "(2*g + co)"),
            std::string::npos)
      << d.front().message;
}

// Ops reading a box of their input (shifted, padded, or part of it) train: the gradient is
// written for the box and placed in zeros (found by the op-form generator: the gradient graph
// failed verification, "starts writing tensor dim 0 at -1"). A read with gaps has no gradient
// rule: the diagnostic names the form that trains.
TEST(Autodiff, ShiftedReadsTrainAndGappedReadsNameTheFormThatTrains) {
  auto graph = [](const std::string& read, int64_t rows) {
    std::string r = std::to_string(rows);
    return "graph t {\n param %x: f32[8, 6]\n %y: f32[" + r + ", 6] = tanh [i=" + r + ", j=6] %x" +
           read + " -> (i, j)\n %l: f32[] = reduce_sum [i=" + r +
           ":sum, j=6:sum] %y(i, j) -> ()\n output %l\n}\n";
  };
  std::mt19937 rng(23);
  for (const auto& [read, rows] : std::vector<std::pair<std::string, int64_t>>{
           {"(i - 1, j + 2) padded", 8}, {"(i + 3, j)", 5}, {"(7 - i, j)", 8}}) {
    SCOPED_TRACE(read);
    auto g = parse_graph(graph(read, rows), "t.hd");
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    testing::check_gradients(*g, g->outputs()[0], -1, 1, rng);
  }
  auto g = parse_graph(graph("(2*i, j)", 4), "t.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  ASSERT_TRUE(verify(*g).empty()) << verify(*g).front().to_string();
  auto gr = build_gradients(*g, g->outputs()[0]);
  ASSERT_FALSE(gr.ok());
  EXPECT_NE(gr.error().message.find("no gradient rule for op 'tanh' in this form: it reads %x "
                                    "through (2*i, j), which does not read a box of it exactly "
                                    "once; the forms that train"),
            std::string::npos)
      << gr.error().to_string();
}

TEST(Autodiff, NonScalarLossIsADiagnostic) {
  Graph g;
  Ops ops(g);
  ValueId y = ops.relu(ops.param("x", f32({3})));
  auto r = build_gradients(g, y);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("must be a float scalar"), std::string::npos);
}

TEST(TrainStep, LossFallsWithEitherOptimizer) {
  for (auto opt :
       {TrainStepOptions::Optimizer::kAdamW, TrainStepOptions::Optimizer::kSgdMomentum}) {
    zoo::ModelOptions mo;
    mo.with_loss = true;
    auto fwd = zoo::build_zoo_model("gpt-tiny", {}, mo);
    ASSERT_TRUE(fwd.ok());
    TrainStepOptions to;
    to.optimizer = opt;
    to.adamw.lr = 1e-2;
    to.sgd.lr = 0.1;
    auto step = build_train_step(*fwd, to);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    EXPECT_TRUE(verify(step->graph).empty());
    Interpreter it(step->graph);
    auto inputs = random_inputs(step->graph, 3, 16);
    std::vector<double> losses;
    for (int s = 1; s <= 8; ++s) {
      auto r = it.run(inputs, s);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      losses.push_back((*r)[0].f32()[0]);
      testing::apply_updates(it, *step, *r);
    }
    EXPECT_LT(losses.back(), 0.8 * losses.front()) << losses.front() << " -> " << losses.back();
  }
}

// The training step (loss, backward, optimizer) of zoo model `name` at batch 2.
Result<TrainStep> zoo_train_step(const char* name) {
  zoo::ZooOverrides ov;
  ov.batch = 2;
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model(name, ov, mo);
  if (!fwd.ok()) return fwd.error();
  return build_train_step(*fwd, {});
}

// Autodiff emits no gradient nobody reads: in the training step of each zoo family every value an
// op computes is read by a later op or is an output. A MoE's dispatch and combine come from the
// routing decision, through which no gradient flows (their gradients would be two [tokens,
// experts x capacity] contractions per MoE layer); an image fed to the first convolution gets no
// input gradient.
TEST(TrainStep, EveryComputedValueIsRead) {
  for (const char* name :
       {"gpt-tiny", "llama-tiny", "moe-tiny", "mixtral-tiny", "vit-tiny", "resnet-tiny", "mlp"}) {
    SCOPED_TRACE(name);
    auto step = zoo_train_step(name);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    const Graph& g = step->graph;
    std::vector<bool> read(static_cast<size_t>(g.num_values()), false);
    for (const Op& op : g.ops())
      for (const auto& in : op.inputs) read[in.value] = true;
    for (ValueId v : g.outputs()) read[v] = true;
    for (const Op& op : g.ops())
      for (const auto& r : op.results)
        EXPECT_TRUE(read[r.value])
            << op_kind_name(op.kind) << " result %" << g.value(r.value).name << " is never read";
  }
}

// The gradients of `scale` and `causal_mask` do not depend on x, so they read dy in x's place: in
// the training steps of the attention models no gradient op reads the scores or the scaled
// scores, which then need not live until the backward (and the forward's scale and mask lower to
// one fused pass, tests/data/lowered). Each gradient still computes alpha dy and the masked dy:
// the finite-difference cases above and the zoo steps' --check runs say so.
TEST(TrainStep, ScaleAndMaskGradientsReadNoForwardValue) {
  for (const char* name : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    auto step = zoo_train_step(name);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    const Graph& g = step->graph;
    int64_t masks = 0;
    for (const Op& op : g.ops()) {
      if (op.kind != OpKind::kCausalMask && op.kind != OpKind::kScale) continue;
      masks += op.kind == OpKind::kCausalMask;
      const ValueId x = op.inputs[0].value;
      for (const Op& u : g.ops())
        for (const auto& in : u.inputs)
          EXPECT_FALSE(in.value == x &&
                       (u.kind == OpKind::kElementwiseGrad || u.kind == OpKind::kNormGrad))
              << op_kind_name(u.kind) << " reads %" << g.value(x).name << ", the input of "
              << op_kind_name(op.kind);
    }
    EXPECT_GT(masks, 0);
  }
}

}  // namespace
}  // namespace heddle
