// The torch-exported fixtures import, run in the interpreter and partitioned over thread-devices,
// and match torch's outputs; a shapes-only read after an import reuses what the import set aside.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "OnnxTestUtil.h"
#include "heddle/frontend/Npy.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/runtime/Executor.h"
#include "heddle/runtime/Lower.h"
#include "heddle/sharding/Tactics.h"

namespace heddle {
namespace {

using testing::expect_close;
using testing::fixture;

struct Fixture {
  ImportedModel model;
  Tensor input, output;
};

Fixture load(const std::string& name) {
  Fixture f;
  auto m = import_onnx_file(fixture(name + ".onnx"),
                            {.dims = {{"batch", 4}}, .base_dir = "", .batch = 0, .loss = ""});
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  if (m.ok()) f.model = std::move(*m);
  auto in = read_npy(fixture(name + ".in.npy"));
  auto out = read_npy(fixture(name + ".out.npy"));
  EXPECT_TRUE(in.ok() && out.ok());
  f.input = *in;
  f.output = *out;
  return f;
}

class OnnxFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxFixture, ImportsVerifiesAndMatchesTorchInTheInterpreter) {
  Fixture f = load(GetParam());
  const Graph& g = f.model.graph;
  EXPECT_TRUE(verify(g).empty()) << verify(g)[0].to_string();
  EXPECT_TRUE(f.model.has_all_weights());
  ASSERT_EQ(g.inputs().size(), 1u);
  ASSERT_EQ(g.outputs().size(), 1u);
  Interpreter interp(g);
  for (ValueId p : g.params()) interp.set_param(p, f.model.weights.at(p));
  auto got = interp.run({f.input});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_close((*got)[0], f.output);
}

// Partitioned on 2 and 4 thread-devices: data parallel everywhere, tensor parallel (and both)
// since every fixture has shardable contractions.
TEST_P(OnnxFixture, RunsPartitionedAndMatchesTorch) {
  Fixture f = load(GetParam());
  const Graph& g = f.model.graph;
  TensorMap feeds = f.model.weights;
  feeds.emplace(g.inputs()[0], f.input);
  for (auto [strategy, devices] : std::vector<std::pair<const char*, int64_t>>{
           {"dp=2", 2}, {"dp=4", 4}, {"tp=2", 2}, {"tp=4", 4}, {"dp=2,tp=2", 4}}) {
    SCOPED_TRACE(std::string(strategy));
    auto spec = StrategySpec::parse(strategy);
    ASSERT_TRUE(spec.ok());
    auto mesh = spec->mesh(devices);
    ASSERT_TRUE(mesh.ok());
    auto plan = plan_from_strategy(g, *mesh, *spec);
    ASSERT_TRUE(plan.ok()) << plan.error().to_string();
    auto programs = lower(g, plan->plan);
    ASSERT_TRUE(programs.ok()) << programs.error().to_string();
    auto got = run_threaded(g, *programs, feeds);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_close(got->at(g.outputs()[0]), f.output);
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, OnnxFixture,
                         ::testing::Values("mlp", "cnn", "encoder", "decoder", "mobilenet", "vit",
                                           "pools", "recurrent"));

TEST(OnnxImport, MapsNodesOntoHeddleOps) {
  Fixture cnn = load("cnn");
  std::map<OpKind, int> kinds;
  for (const Op& op : cnn.model.graph.ops()) ++kinds[op.kind];
  EXPECT_EQ(kinds[OpKind::kConv2d], 3);
  EXPECT_EQ(kinds[OpKind::kMaxPool2d], 1);
  EXPECT_EQ(kinds[OpKind::kAvgPool2d], 1);
  Fixture mlp = load("mlp");
  kinds.clear();
  for (const Op& op : mlp.model.graph.ops()) ++kinds[op.kind];
  EXPECT_EQ(kinds[OpKind::kGelu], 1) << "Erf-based GELU fuses into one gelu";
  EXPECT_EQ(kinds[OpKind::kEinsum], 3);
  Fixture enc = load("encoder");
  kinds.clear();
  for (const Op& op : enc.model.graph.ops()) ++kinds[op.kind];
  EXPECT_EQ(kinds[OpKind::kLayerNorm], 4);
  EXPECT_EQ(kinds[OpKind::kEmbedding], 1);
  EXPECT_EQ(kinds[OpKind::kSoftmax], 2);
  Fixture dec = load("decoder");  // opset 14: LayerNorm arrives decomposed and is fused back
  kinds.clear();
  for (const Op& op : dec.model.graph.ops()) ++kinds[op.kind];
  EXPECT_EQ(kinds[OpKind::kLayerNorm], 5);
  EXPECT_EQ(kinds[OpKind::kReduceMean], 0);
  EXPECT_EQ(kinds[OpKind::kGelu], 2);
}

// fuzz/corpus/onnx/<name>_noweights.onnx: the fixtures with their large initializers pointing
// at an absent external file (fuzz/strip_onnx_weights.py). They must import to the same graph
// shape, listing what is missing: a model shipped without its weights still plans.
TEST_P(OnnxFixture, ImportsWithoutWeightsToTheSameOps) {
  std::string name = GetParam();
  Fixture full = load(name);
  auto bare = import_onnx_file(
      std::string(HEDDLE_SOURCE_DIR) + "/fuzz/corpus/onnx/" + name + "_noweights.onnx",
      {.dims = {{"batch", 4}}, .base_dir = "", .batch = 0, .loss = ""});
  ASSERT_TRUE(bare.ok()) << bare.error().to_string();
  EXPECT_TRUE(verify(bare->graph).empty());
  EXPECT_FALSE(bare->has_all_weights());
  const Graph& a = full.model.graph;
  const Graph& b = bare->graph;
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i)
    EXPECT_EQ(a.type(a.outputs()[i]), b.type(b.outputs()[i]));
  std::map<OpKind, int> ka, kb;
  for (const Op& op : a.ops()) ++ka[op.kind];
  for (const Op& op : b.ops()) ++kb[op.kind];
  // Weights fold into constants where present; the compute ops are the same either way.
  for (OpKind k :
       {OpKind::kEinsum, OpKind::kConv2d, OpKind::kLayerNorm, OpKind::kGelu, OpKind::kSoftmax})
    EXPECT_EQ(ka[k], kb[k]) << op_kind_name(k);
}

// ONNX Einsum as torch exports it (maxvit: upper-case indices, spaces) against a hand loop.
TEST(OnnxImport, EinsumMatchesAHandLoop) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  for (auto [name, dims] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
           {"x", {2, 3, 4}}, {"y", {2, 5, 4}}}) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  auto* e = g->add_node();
  e->set_op_type("Einsum");
  e->set_name("attn");
  e->add_input("x");
  e->add_input("y");
  e->add_output("z");
  auto* eq = e->add_attribute();
  eq->set_name("equation");
  eq->set_type(onnx::AttributeProto::STRING);
  eq->set_s("B I D, B J D -> B I J");
  g->add_output()->set_name("z");
  auto r = import_onnx_bytes(m.SerializeAsString(), "einsum.onnx");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Graph& gr = r->graph;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor x(DType::kF32, IVec{2, 3, 4}), y(DType::kF32, IVec{2, 5, 4}), want(DType::kF32, {2, 3, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = u(rng);
  for (int64_t i = 0; i < y.numel(); ++i) y.f32()[i] = u(rng);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        float acc = 0;
        for (int64_t d = 0; d < 4; ++d)
          acc += x.f32()[(b * 3 + i) * 4 + d] * y.f32()[(b * 5 + j) * 4 + d];
        want.f32()[(b * 3 + i) * 5 + j] = acc;
      }
  Interpreter it(gr);
  auto got = it.run({x, y});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_close((*got)[0], want);
}

TEST(OnnxImport, BindsDynamicDims) {
  auto m8 = import_onnx_file(fixture("mlp.onnx"),
                             {.dims = {{"batch", 8}}, .base_dir = "", .batch = 0, .loss = ""});
  ASSERT_TRUE(m8.ok());
  EXPECT_EQ(m8->graph.type(m8->graph.inputs()[0]).shape(), (IVec{8, 16}));
  auto unbound = import_onnx_file(fixture("mlp.onnx"));
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.error().message.find("--dim batch=VALUE"), std::string::npos)
      << unbound.error().message;
}

// x [3, 2, 4] (sequence, batch, width, as torch's attention holds it): q = x^T [2, 3, 4] and
// k = x^T [2, 4, 3] by Transposes, s = (q / 2) k by a Mul and a MatMul, then y = s (q + q). The
// halving runs on x's layout and the MatMul reads both operands in place (no transpose op for k,
// which nothing else reads); q is emitted once, for the Add. Both outputs match loops over x, as
// do the attention fixtures (OnnxFixture).
TEST(OnnxImport, TransposesIntoBatchedMatMulsAreReadInPlace) {
  onnx::ModelProto m = testing::model_with_input("transposed_matmuls", {3, 2, 4});
  auto* g = m.mutable_graph();
  auto node = [&](const char* op, std::vector<std::string> ins, const std::string& out,
                  std::vector<int64_t> perm = {}) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out + "_node");
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    if (perm.empty()) return;
    auto* a = n->add_attribute();
    a->set_name("perm");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : perm) a->add_ints(v);
  };
  auto* half = g->add_initializer();
  half->set_name("half");
  half->set_data_type(onnx::TensorProto::FLOAT);
  half->add_float_data(0.5f);
  node("Transpose", {"x"}, "q", {1, 0, 2});
  node("Transpose", {"x"}, "k", {1, 2, 0});
  node("Mul", {"q", "half"}, "qs");
  node("MatMul", {"qs", "k"}, "s");
  node("Add", {"q", "q"}, "q2");
  node("MatMul", {"s", "q2"}, "y");
  g->add_output()->set_name("s");
  g->add_output()->set_name("y");
  auto model = import_onnx_bytes(m.SerializeAsString(), "transposed_matmuls.onnx");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Graph& gr = model->graph;
  EXPECT_TRUE(verify(gr).empty());
  int transposes = 0;
  for (const Op& op : gr.ops()) transposes += op.kind == OpKind::kTranspose;
  EXPECT_EQ(transposes, 1);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor x(DType::kF32, IVec{3, 2, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = u(rng);
  auto at = [&](int64_t t, int64_t b, int64_t d) { return x.f32()[(t * 2 + b) * 4 + d]; };
  Tensor s(DType::kF32, IVec{2, 3, 3}), y(DType::kF32, IVec{2, 3, 4});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        float acc = 0.0f;
        for (int64_t d = 0; d < 4; ++d) acc += 0.5f * at(i, b, d) * at(j, b, d);  // q k / 2
        s.f32()[(b * 3 + i) * 3 + j] = acc;
      }
      for (int64_t d = 0; d < 4; ++d) {
        float acc = 0.0f;
        for (int64_t j = 0; j < 3; ++j) acc += s.f32()[(b * 3 + i) * 3 + j] * 2.0f * at(j, b, d);
        y.f32()[(b * 3 + i) * 4 + d] = acc;
      }
    }
  Interpreter it(gr);
  auto got = it.run({x});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_close((*got)[0], s, 1e-5, 1e-6);
  expect_close((*got)[1], y, 1e-5, 1e-6);
}

}  // namespace
}  // namespace heddle

namespace heddle {
namespace {

// read_onnx_shapes_only answers from what the last import of the same, unchanged file set aside
// (a run imports its model, then prices it): the same bytes as a fresh read, the import's
// weights intact, answered without reading the file, and a changed file read again.
TEST(OnnxShapesOnly, AnImportSetsAsideTheSameShapesAndKeepsItsWeights) {
  const std::string src = testing::fixture("cnn.onnx");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("heddle_shapes_" + std::to_string(getpid()) + ".onnx"))
                               .string();
  std::filesystem::copy_file(src, path, std::filesystem::copy_options::overwrite_existing);
  auto fresh = read_onnx_shapes_only(path);  // parsed: nothing set aside for this path yet
  ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
  auto direct = import_onnx_file(src);
  auto imported = import_onnx_file(path);
  ASSERT_TRUE(direct.ok() && imported.ok());
  ASSERT_FALSE(imported->weights.empty());
  EXPECT_TRUE(imported->missing_weights.empty());
  ASSERT_EQ(imported->weights.size(), direct->weights.size());
  for (const auto& [v, t] : direct->weights) EXPECT_EQ(imported->weights.at(v), t);
  auto again = read_onnx_shapes_only(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *fresh);
  auto shapes = import_onnx_bytes(*again, path);
  ASSERT_TRUE(shapes.ok()) << shapes.error().to_string();
  EXPECT_FALSE(shapes->missing_weights.empty());  // the large weights are data-free
  // The answer comes from the import, not from the file: bytes that do not parse, of the same
  // size and modification time, still read as the import's shapes.
  const auto size = std::filesystem::file_size(path);
  const auto mtime = std::filesystem::last_write_time(path);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << std::string(size, '\xff');
  }
  std::filesystem::last_write_time(path, mtime);
  auto kept = read_onnx_shapes_only(path);
  ASSERT_TRUE(kept.ok()) << kept.error().to_string();
  EXPECT_EQ(*kept, *fresh);
  // A file whose size or time changed is read again, not answered from the last import.
  std::filesystem::last_write_time(path, mtime + std::chrono::seconds(1));
  EXPECT_FALSE(read_onnx_shapes_only(path).ok());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "not onnx";
  }
  EXPECT_FALSE(read_onnx_shapes_only(path).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace heddle
