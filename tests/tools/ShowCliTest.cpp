// `heddle show` end to end: summaries, exports and JSON keys (bad input: BadInputCliTest.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

std::string src() { return testing::source_dir(); }

TEST(ShowCli, SummarizesEveryExample) {
  for (const char* name : {"mlp", "convnet", "attention"}) {
    auto r = run_heddle("show " + src() + "/examples/" + name + ".hd");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("parameters"), std::string::npos);
    EXPECT_NE(r.out.find("FLOPs"), std::string::npos);
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  auto r = run_heddle("show " + src() + "/examples/mlp.hd");
  EXPECT_NE(r.out.find("ops          9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("einsum         %h1                  f32[64, 512]"), std::string::npos);
}

TEST(ShowCli, JsonHasTheContractKeys) {
  auto r = run_heddle("show --json " + src() + "/examples/mlp.hd");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"ops", "tensors", "parameters", "flops", "inputs", "outputs"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["ops"], 9);
  EXPECT_EQ(j["parameters"], 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["type"], "f32[64, 784]");
  EXPECT_EQ(j["outputs"][0]["type"], "f32[]");  // the example ends in its loss
}

TEST(ShowCli, WritesTextThatRoundTripsAndDotThatGraphvizReads) {
  std::string dir = ::testing::TempDir();
  auto r = run_heddle("show " + src() + "/examples/convnet.hd --text " + dir + "/c.hd --dot " +
                      dir + "/c.dot");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto again = run_heddle("show " + dir + "/c.hd --text " + dir + "/c2.hd");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  std::ifstream a(dir + "/c.hd"), b(dir + "/c2.hd");
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  EXPECT_FALSE(sa.str().empty());
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    std::string cmd = "dot -Tsvg " + dir + "/c.dot -o " + dir + "/c.svg";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "graphviz rejected the DOT output";
  }
}

TEST(ShowCli, UnwritableOutputIsAUserError) {
  auto r = run_heddle("show " + src() + "/examples/mlp.hd --dot /nonexistent/dir/g.dot");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(
      r.err,
      "/nonexistent/dir/g.dot: error: cannot write: No such file or directory (creating a file "
      "in /nonexistent/dir)\n");
}

TEST(ShowCli, HelpListsOnlyWorkingCommandsAndUsageErrorsExitOne) {
  auto help = run_heddle("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("show"), std::string::npos);
  auto none = run_heddle("");
  EXPECT_EQ(none.exit_code, 1);
  auto bad_flag = run_heddle("show --frobnicate x.hd");
  EXPECT_EQ(bad_flag.exit_code, 1);
  EXPECT_NE(bad_flag.err.find("frobnicate"), std::string::npos);
}

// `show --mesh ... --json` printed the plan as text (so stdout was not JSON) and dropped --dot and
// --text: --json is refused with the plan's options, and the graph files are written as well.
TEST(ShowCli, PlanOptionsRefuseJsonAndStillWriteTheGraphFiles) {
  auto r = run_heddle("show gpt-tiny --mesh 2 --strategy dp=2 --json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
  const std::string dir = ::testing::TempDir();
  std::remove((dir + "/plan_g.dot").c_str());
  auto d = run_heddle("show gpt-tiny --mesh 2 --strategy dp=2 --dot " + dir + "/plan_g.dot");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("plan: strategy dp=2"), std::string::npos) << d.out;
  std::ifstream dot(dir + "/plan_g.dot");
  EXPECT_TRUE(dot.good()) << "--dot with --mesh wrote no file";
}

}  // namespace
}  // namespace heddle
