// Re-batching a model exported with a fixed batch (`--batch N`) and training an imported model
// (`--train --loss`): the batch scales through torch's shape arithmetic, a shape fixed at export is
// a diagnostic naming the node, and the appended loss trains like a zoo model's.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "OnnxTestUtil.h"
#include "common/RunCli.h"
#include "common/TrainStepUtil.h"
#include "heddle/frontend/Npy.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"

namespace heddle {
namespace {

using testing::expect_close;
using testing::fixture;

OnnxImportOptions batch(int64_t b) {
  OnnxImportOptions o;
  o.batch = b;
  return o;
}

OnnxImportOptions with_loss(const char* loss) {
  OnnxImportOptions o;
  o.loss = loss;
  return o;
}

// `t` [B, ...] repeated `k` times along dim 0.
Tensor repeat_batch(const Tensor& t, int64_t k) {
  std::vector<int64_t> s(t.shape().begin(), t.shape().end());
  s[0] *= k;
  Tensor out(t.dtype(), IVec(s));
  for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = t.f32()[i % t.numel()];
  return out;
}

// The cnn and vit fixtures were exported with a fixed batch of 4 (Flatten, and torchvision's
// class-token Expand and reshapes computed from Shape). Re-batched to 8 and fed their input
// twice over, they give torch's output twice over.
TEST(OnnxRebatch, FixedBatchModelsScaleAndMatchTorch) {
  for (const char* name : {"cnn", "vit", "pools", "recurrent"}) {
    SCOPED_TRACE(name);
    auto m = import_onnx_file(fixture(std::string(name) + ".onnx"), batch(8));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    EXPECT_EQ(m->exported_batch, 4);
    const Graph& g = m->graph;
    ASSERT_TRUE(verify(g).empty());
    EXPECT_EQ(g.type(g.inputs()[0]).shape()[0], 8);
    auto in = read_npy(fixture(std::string(name) + ".in.npy"));
    auto out = read_npy(fixture(std::string(name) + ".out.npy"));
    ASSERT_TRUE(in.ok() && out.ok());
    Interpreter it(g);
    for (ValueId p : g.params()) it.set_param(p, m->weights.at(p));
    auto got = it.run({repeat_batch(*in, 2)});
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_close((*got)[0], repeat_batch(*out, 2));
  }
}

TEST(OnnxRebatch, DynamicBatchIsBoundByBatch) {
  auto m = import_onnx_file(fixture("mlp.onnx"), batch(6));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->graph.type(m->graph.inputs()[0]).shape(), (IVec{6, 16}));
}

// x [2, 3, 4] -> Reshape(shape) -> (MatMul by w [features, 5] when `matmul`) -> y.
std::string pinned_model(const std::vector<int64_t>& shape, bool matmul) {
  onnx::ModelProto m = testing::model_with_input("pinned", {2, 3, 4});
  auto* g = m.mutable_graph();
  auto* s = g->add_initializer();
  s->set_name("shape");
  s->set_data_type(onnx::TensorProto::INT64);
  s->add_dims(static_cast<int64_t>(shape.size()));
  for (int64_t v : shape) s->add_int64_data(v);
  auto* r = g->add_node();
  r->set_op_type("Reshape");
  r->set_name("flatten_fixed");
  r->add_input("x");
  r->add_input("shape");
  r->add_output(matmul ? "h" : "y");
  if (matmul) {
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    int64_t k = shape[0] == 1 ? 24 : shape[0] == 3 ? 8 : 12;  // features per row at batch 2
    w->add_dims(k);
    w->add_dims(5);
    for (int64_t i = 0; i < k * 5; ++i) w->add_float_data(0.01f * static_cast<float>(i));
    auto* mm = g->add_node();
    mm->set_op_type("MatMul");
    mm->set_name("head");
    mm->add_input("h");
    mm->add_input("w");
    mm->add_output("y");
  }
  g->add_output()->set_name("y");
  return m.SerializeAsString();
}

TEST(OnnxRebatch, AShapeFixedAtExportIsNamed) {
  // [3, 8]: rows mix samples, at batch 4 the reshape cannot hold the input.
  auto a = import_onnx_bytes(pinned_model({3, 8}, true), "a.onnx", batch(4));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("cannot re-batch from the exported batch 2 to 4"),
            std::string::npos)
      << a.error().message;
  EXPECT_NE(a.error().message.find("flatten_fixed"), std::string::npos) << a.error().message;
  // [1, -1] then a MatMul: the batch merges into the features and the MatMul rejects it; the
  // message names the reshape that merged it.
  auto b = import_onnx_bytes(pinned_model({1, -1}, true), "b.onnx", batch(4));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("'flatten_fixed' (Reshape)"), std::string::npos)
      << b.error().message;
  EXPECT_NE(b.error().message.find("[1, 24] at batch 2, [1, 48] at batch 4"), std::string::npos)
      << b.error().message;
  // [1, -1] as the output: it imports, but the output lost its batch axis.
  auto c = import_onnx_bytes(pinned_model({1, -1}, false), "c.onnx", batch(4));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("output 'y'"), std::string::npos) << c.error().message;
  // [2, 12] (the batch written out) and [0, -1] (copied) scale with the batch.
  auto e = import_onnx_bytes(pinned_model({2, 12}, true), "e.onnx", batch(4));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->graph.type(e->graph.outputs()[0]).shape(), (IVec{4, 5}));
  auto d = import_onnx_bytes(pinned_model({0, -1}, true), "d.onnx", batch(4));
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_EQ(d->graph.type(d->graph.outputs()[0]).shape(), (IVec{4, 5}));
}

// torch's nn.MultiheadAttention at a fixed batch: x [2, 4, 6] goes sequence-first, the batch
// merges with 3 heads (`view(seq, batch * heads, 2)`), comes back, merges with the sequence as its
// inner factor (`view(seq * batch, 6)`) and splits out again (`view(seq, batch, 6)`). The last
// literal [4, 2, 6] could scale its 4 or its 2: only where the batch sits in [8, 6] (tracked from
// the input through every Reshape and Transpose) says the 2. Every step inverts, so y is x.
std::string attention_reshapes_model() {
  onnx::ModelProto m = testing::model_with_input("mha_reshapes", {2, 4, 6});
  auto* g = m.mutable_graph();
  int k = 0;
  std::string last = "x";
  auto transpose = [&] {
    auto* n = g->add_node();
    n->set_op_type("Transpose");
    n->set_name("t" + std::to_string(k));
    n->add_input(last);
    last = "v" + std::to_string(k++);
    n->add_output(last);
    auto* a = n->add_attribute();
    a->set_name("perm");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : {1, 0, 2}) a->add_ints(v);
  };
  auto reshape = [&](const std::vector<int64_t>& shape) {
    auto* s = g->add_initializer();
    s->set_name("shape" + std::to_string(k));
    s->set_data_type(onnx::TensorProto::INT64);
    s->add_dims(static_cast<int64_t>(shape.size()));
    for (int64_t v : shape) s->add_int64_data(v);
    auto* n = g->add_node();
    n->set_op_type("Reshape");
    n->set_name("r" + std::to_string(k));
    n->add_input(last);
    n->add_input(s->name());
    last = "v" + std::to_string(k++);
    n->add_output(last);
  };
  transpose();         // [4, 2, 6]
  reshape({4, 6, 2});  // batch x 3 heads
  transpose();         // [6, 4, 2]
  transpose();         // [4, 6, 2]
  reshape({8, 6});     // sequence x batch
  reshape({4, 2, 6});
  transpose();  // [2, 4, 6]
  g->mutable_node(g->node_size() - 1)->set_output(0, "y");
  g->add_output()->set_name("y");
  return m.SerializeAsString();
}

TEST(OnnxRebatch, TheBatchIsTrackedThroughAttentionReshapes) {
  auto m = import_onnx_bytes(attention_reshapes_model(), "mha.onnx", batch(4));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  const Graph& g = m->graph;
  ASSERT_EQ(g.type(g.outputs()[0]).shape(), (IVec{4, 4, 6}));
  Tensor x(DType::kF32, IVec{2, 4, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(i);
  Interpreter it(g);
  auto got = it.run({repeat_batch(x, 2)});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_close((*got)[0], repeat_batch(x, 2), 0, 0);
}

// The loss appended to an imported classifier trains: the loss falls over a few AdamW steps on a
// fixed batch, for both losses.
TEST(OnnxTrain, AppendedLossTrainsInTheInterpreter) {
  for (const char* loss : {"cross_entropy", "mse"}) {
    SCOPED_TRACE(loss);
    auto m = import_onnx_file(fixture("cnn.onnx"), with_loss(loss));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    const Graph& fwd = m->graph;
    ASSERT_EQ(fwd.outputs().size(), 1u);
    EXPECT_EQ(fwd.type(fwd.outputs()[0]).rank(), 0);
    ASSERT_EQ(fwd.inputs().size(), 2u);
    EXPECT_EQ(fwd.value(fwd.inputs()[1]).name, "labels");
    EXPECT_EQ(fwd.type(fwd.inputs()[1]).dtype(),
              std::string(loss) == "mse" ? DType::kF32 : DType::kI64);
    TrainStepOptions to;
    to.adamw.lr = 1e-2;
    auto step = build_train_step(fwd, to);
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    Interpreter it(step->graph);
    for (ValueId p : fwd.params()) it.set_param(p, m->weights.at(p));
    auto inputs = random_inputs(step->graph, 1, 10);
    std::vector<double> losses;
    for (int s = 1; s <= 5; ++s) {
      auto r = it.run(inputs, s);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      losses.push_back((*r)[0].f32()[0]);
      testing::apply_updates(it, *step, *r);
    }
    EXPECT_LT(losses.back(), 0.9 * losses.front()) << losses.front() << " -> " << losses.back();
  }
}

TEST(OnnxTrain, LossDiagnostics) {
  auto bad = import_onnx_file(fixture("cnn.onnx"), with_loss("hinge"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'hinge' is not a loss"), std::string::npos);
}

// `heddle run model.onnx --train --check` on 2 thread-devices: the sharded training step matches
// the interpreter's, with labels from a file, and the loss falls.
TEST(OnnxTrain, CliRunTrainCheckOnTwoDevices) {
  Tensor labels(DType::kI64, IVec{4});
  for (int64_t i = 0; i < 4; ++i) labels.i64()[i] = (3 * i + 1) % 10;
  std::string lp = ::testing::TempDir() + "heddle_onnx_train_labels.npy";
  ASSERT_TRUE(write_npy(lp, labels).ok());
  auto r = testing::run_heddle("run " + fixture("cnn.onnx") + " --mesh 2 --strategy dp=2 --train " +
                               "--loss cross_entropy --steps 4 --check --json --input " +
                               fixture("cnn.in.npy") + " --labels " + lp);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("\"ok\": true"), std::string::npos) << r.out;
  auto plan = testing::run_heddle("plan " + fixture("cnn.onnx") +
                                  " --batch 64 --train --cluster a100x8 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err << plan.out;
  EXPECT_NE(plan.out.find("\"batch\": 64"), std::string::npos) << plan.out;
}

}  // namespace
}  // namespace heddle
