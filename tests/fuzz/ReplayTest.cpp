// The fuzz targets' seeds and regressions, replayed: each input goes through the same parse and
// property checks as under libFuzzer (here a violated property makes the target return 1, which
// fails the input's EXPECT_EQ below; fuzz/FuzzCheck.h). Every file
// in fuzz/regressions/<target>/ is an input a fuzzer once crashed, hung or tripped a sanitizer on.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

extern "C" int heddle_fuzz_TextIr(const uint8_t* data, size_t size);
extern "C" int heddle_fuzz_TextIrRun(const uint8_t* data, size_t size);
extern "C" int heddle_fuzz_Placement(const uint8_t* data, size_t size);
extern "C" int heddle_fuzz_Onnx(const uint8_t* data, size_t size);
extern "C" int heddle_fuzz_Cluster(const uint8_t* data, size_t size);
extern "C" int heddle_fuzz_Npy(const uint8_t* data, size_t size);

namespace heddle {
namespace {

struct Target {
  const char* name;  // fuzz/corpus/<name>, fuzz/regressions/<name>
  int (*one_input)(const uint8_t*, size_t);
};

void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

class FuzzReplay : public ::testing::TestWithParam<Target> {};

// Replays every file under fuzz/<kind>/<target>; returns how many.
int replay(const Target& t, const std::string& kind) {
  std::filesystem::path dir = std::filesystem::path(HEDDLE_SOURCE_DIR) / "fuzz" / kind / t.name;
  if (!std::filesystem::exists(dir)) return 0;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(t.one_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++n;
  }
  return n;
}

TEST_P(FuzzReplay, SeedsAndRegressionsPassTheTargetsChecks) {
  EXPECT_GE(replay(GetParam(), "corpus"), 2) << "seed corpus missing";
  replay(GetParam(), "regressions");
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay,
                         ::testing::Values(Target{"text_ir", heddle_fuzz_TextIr},
                                           Target{"text_ir_run", heddle_fuzz_TextIrRun},
                                           Target{"placement", heddle_fuzz_Placement},
                                           Target{"onnx", heddle_fuzz_Onnx},
                                           Target{"cluster", heddle_fuzz_Cluster},
                                           Target{"npy", heddle_fuzz_Npy}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace heddle
