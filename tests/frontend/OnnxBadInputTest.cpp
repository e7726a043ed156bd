// Models the importer must refuse (or import without weights) with a clear diagnostic, never a
// crash: unsupported ops, truncated and garbage files, stripped weights, bad opsets. Edited models
// are built with the protobuf API from the committed fixtures.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <sstream>

#include "OnnxTestUtil.h"
#include "common/RunCli.h"
#include "heddle/frontend/Npy.h"
#include "heddle/frontend/OnnxImport.h"

namespace heddle {
namespace {

using testing::fixture;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

onnx::ModelProto read_model(const std::string& name) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read_bytes(fixture(name))));
  return m;
}

std::string write_temp(const onnx::ModelProto& m, const std::string& name) {
  std::string path = ::testing::TempDir() + "heddle_onnx_" + name + ".onnx";
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return path;
}

const OnnxImportOptions kBatch4 = {.dims = {{"batch", 4}}, .base_dir = "", .batch = 0, .loss = ""};

TEST(OnnxBadInput, UnsupportedOpNamesTypeNodeOpsetAndSupportedOps) {
  onnx::ModelProto m = read_model("mlp.onnx");
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Relu") n.set_op_type("NonZero");
  auto r = import_onnx_bytes(m.SerializeAsString(), "edited.onnx", kBatch4);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find("unsupported ONNX op 'NonZero'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/Relu"), std::string::npos) << msg;  // the node's name
  EXPECT_NE(msg.find("opset 13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Supported ops:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MatMul"), std::string::npos) << msg;
  EXPECT_EQ(r.error().loc.file, "edited.onnx");
}

TEST(OnnxBadInput, CliUnsupportedOpExitsOne) {
  onnx::ModelProto m = read_model("mlp.onnx");
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Relu") n.set_op_type("NonZero");
  auto r = testing::run_heddle("show " + write_temp(m, "unsupported") + " --dim batch=4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unsupported ONNX op 'NonZero'"), std::string::npos) << r.err;
}

TEST(OnnxBadInput, TruncatedFilesAreDiagnosedAtEveryCut) {
  std::string bytes = read_bytes(fixture("decoder.onnx"));
  for (int k = 1; k < 20; ++k) {
    std::string cut = bytes.substr(0, bytes.size() * k / 20);
    auto r = import_onnx_bytes(cut, "cut.onnx");
    EXPECT_FALSE(r.ok()) << "cut at " << k << "/20 imported";
  }
  const std::string truncated = ::testing::TempDir() + "heddle_onnx_truncated.onnx";
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto cli = testing::run_heddle("show " + truncated);
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("not a valid ONNX file"), std::string::npos) << cli.err;
}

TEST(OnnxBadInput, GarbageAndEmptyFilesAreDiagnosed) {
  for (std::string junk : {std::string("this is not a protobuf at all\n"), std::string(),
                           std::string("\x08\x07", 2), std::string(1000, '\xff')}) {
    auto r = import_onnx_bytes(junk, "junk.onnx");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().loc.file, "junk.onnx");
  }
  auto missing = import_onnx_file("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot open"), std::string::npos);
}

TEST(OnnxBadInput, StrippedWeightsImportButRunSaysMissing) {
  onnx::ModelProto m = read_model("cnn.onnx");
  for (auto& t : *m.mutable_graph()->mutable_initializer()) t.clear_raw_data();
  auto r = import_onnx_bytes(m.SerializeAsString(), "stripped.onnx");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(r->has_all_weights());
  EXPECT_TRUE(r->weights.empty());

  std::string path = write_temp(m, "stripped");
  auto show = testing::run_heddle("show " + path + " --json");
  EXPECT_EQ(show.exit_code, 0) << show.err;
  auto plan = testing::run_heddle("show " + path + " --mesh 2 --strategy dp=2");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  auto run = testing::run_heddle("run " + path + " --mesh 2 --strategy dp=2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("weights are missing"), std::string::npos) << run.err;
}

TEST(OnnxBadInput, AbsentExternalDataMeansMissingWeights) {
  onnx::ModelProto m = read_model("mlp.onnx");
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t.add_external_data();
    kv->set_key("location");
    kv->set_value("no_such_weights.bin");
  }
  auto r = import_onnx_bytes(m.SerializeAsString(), "external.onnx", kBatch4);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->missing_weights.size(), 6u);
}

TEST(OnnxBadInput, OpsetsOutside13To17AreRefused) {
  onnx::ModelProto m = read_model("mlp.onnx");
  m.mutable_opset_import(0)->set_version(18);
  auto r = import_onnx_bytes(m.SerializeAsString(), "new.onnx", kBatch4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("opset 18"), std::string::npos) << r.error().message;
}

TEST(OnnxBadInput, LoneErfIsExplained) {
  onnx::ModelProto m = read_model("mlp.onnx");
  // Break the GELU pattern: the Erf's Add now adds 2 instead of 1.
  std::string add_const;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Add") add_const = n.input(1);
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Constant" && n.output(0) == add_const) {
      auto* t = n.mutable_attribute(0)->mutable_t();
      float two = 2.0f;
      t->set_raw_data(std::string(reinterpret_cast<char*>(&two), 4));
    }
  auto r = import_onnx_bytes(m.SerializeAsString(), "erf.onnx", kBatch4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("GELU"), std::string::npos) << r.error().message;
}

TEST(OnnxCli, RunTakesNpyInputsAndWritesNpyOutputs) {
  for (const char* name : {"mlp", "decoder"}) {
    std::string out = ::testing::TempDir() + "heddle_onnx_" + name + ".out.npy";
    std::string dims = std::string(name) == "mlp" ? " --dim batch=4 " : " ";  // decoder: fixed
    auto r = testing::run_heddle(std::string("run ") + fixture(name) + ".onnx" + dims +
                                 "--mesh 2 --strategy dp=2 --input " + fixture(name) +
                                 ".in.npy --output " + out + " --check --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"ok\": true"), std::string::npos) << r.out;
    auto got = read_npy(out);
    auto want = read_npy(fixture(name) + ".out.npy");
    ASSERT_TRUE(got.ok() && want.ok());
    testing::expect_close(*got, *want);
  }
  auto wrong =
      testing::run_heddle("run " + fixture("cnn.onnx") + " --input " + fixture("mlp.in.npy"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("mlp.in.npy"), std::string::npos) << wrong.err;
}

TEST(OnnxCli, ShowBindsDynamicDimsAndReportsJson) {
  auto r = testing::run_heddle("show " + fixture("mlp.onnx") + " --dim batch=8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("f32[8, 16]"), std::string::npos) << r.out;
  auto unbound = testing::run_heddle("show " + fixture("mlp.onnx"));
  EXPECT_EQ(unbound.exit_code, 1);
  EXPECT_NE(unbound.err.find("--dim batch=VALUE"), std::string::npos) << unbound.err;
  auto bad = testing::run_heddle("show " + fixture("mlp.onnx") + " --dim batch");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("NAME=VALUE"), std::string::npos) << bad.err;
  // A binding no input uses is a typo or a wrong model: named, with the dims there are.
  auto unused = testing::run_heddle("show " + fixture("mlp.onnx") + " --dim batch=8 --dim bach=2");
  EXPECT_EQ(unused.exit_code, 1);
  EXPECT_NE(unused.err.find("no dynamic dim named 'bach'; its dynamic dims are: batch"),
            std::string::npos)
      << unused.err;
  auto fixed = testing::run_heddle("show " + fixture("cnn.onnx") + " --dim x=1");
  EXPECT_EQ(fixed.exit_code, 1);
  EXPECT_NE(fixed.err.find("all its input dims are fixed"), std::string::npos) << fixed.err;
  // plan and simulate bind dims too.
  auto plan =
      testing::run_heddle("plan " + fixture("mlp.onnx") + " --dim batch=8 --cluster a100x2 --json");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  auto sim = testing::run_heddle("simulate " + fixture("mlp.onnx") +
                                 " --dim batch=8 --cluster a100x2 --strategy dp=2");
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

TEST(OnnxCli, RunWithoutInputsUsesRandomOnesAndTheModelsWeights) {
  auto r = testing::run_heddle("run " + fixture("encoder.onnx") +
                               " --mesh 4 --strategy dp=2,tp=2 --check --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ok\": true"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace heddle
