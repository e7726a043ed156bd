// Corrupted models never crash the importer: byte flips of whole files, and structural edits
// (attribute values, dropped inputs) of the fixtures, each imported in-process. Every import
// returns a model or a diagnostic; a crash or failed assertion fails the whole binary.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <random>
#include <sstream>

#include "OnnxTestUtil.h"
#include "heddle/frontend/OnnxImport.h"
#include "heddle/ir/Verifier.h"

namespace heddle {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const OnnxImportOptions kBatch4 = {.dims = {{"batch", 4}}, .base_dir = ".", .batch = 0, .loss = ""};

// An import that succeeds must give a graph the verifier accepts.
void import_and_check(const std::string& bytes, const std::string& what) {
  auto r = import_onnx_bytes(bytes, "fuzz.onnx", kBatch4);
  if (r.ok()) {
    auto diags = verify(r->graph);
    EXPECT_TRUE(diags.empty()) << what << ": " << diags[0].to_string();
  } else {
    EXPECT_FALSE(r.error().message.empty()) << what;
  }
}

class OnnxFuzz : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxFuzz, ByteFlipsAreDiagnosedOrImported) {
  std::string bytes = read_bytes(testing::fixture(std::string(GetParam()) + ".onnx"));
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 150; ++trial) {
    std::string b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    import_and_check(b, "byte-flip trial " + std::to_string(trial));
  }
}

TEST_P(OnnxFuzz, StructuralEditsAreDiagnosedOrImported) {
  onnx::ModelProto base;
  ASSERT_TRUE(
      base.ParseFromString(read_bytes(testing::fixture(std::string(GetParam()) + ".onnx"))));
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    onnx::ModelProto m = base;
    auto* nodes = m.mutable_graph()->mutable_node();
    auto& n = nodes->at(static_cast<int>(rng() % nodes->size()));
    switch (rng() % 4) {
      case 0:  // perturb an int or ints attribute
        for (auto& a : *n.mutable_attribute()) {
          if (a.type() == onnx::AttributeProto::INT) a.set_i(static_cast<int64_t>(rng() % 11) - 5);
          for (int i = 0; i < a.ints_size(); ++i)
            a.set_ints(i, static_cast<int64_t>(rng() % 11) - 5);
          if (rng() % 2 && a.type() == onnx::AttributeProto::INTS) a.add_ints(3);
        }
        break;
      case 1:  // drop the last input
        if (n.input_size() > 0) n.mutable_input()->RemoveLast();
        break;
      case 2:  // blank an input or output name
        if (n.input_size() > 0)
          n.set_input(static_cast<int>(rng() % n.input_size()), "");
        else if (n.output_size() > 0)
          n.set_output(0, "");
        break;
      default:  // feed the node a different tensor
        if (n.input_size() > 0 && nodes->size() > 1) {
          const auto& other = nodes->at(static_cast<int>(rng() % nodes->size()));
          if (other.output_size() > 0)
            n.set_input(static_cast<int>(rng() % n.input_size()), other.output(0));
        }
    }
    import_and_check(m.SerializeAsString(), "edit trial " + std::to_string(trial) + " on " +
                                                n.op_type() + " '" + n.name() + "'");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxFuzz,
                         ::testing::Values("mlp", "cnn", "encoder", "decoder", "mobilenet", "vit",
                                           "pools", "recurrent"));

}  // namespace
}  // namespace heddle
