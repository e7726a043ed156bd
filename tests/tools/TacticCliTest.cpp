// Tactics end to end: a value's tactic in the text IR and `--tactic` pin splits the presets
// cannot express, runs match the reference, conflicts name both sources, and show/run report
// what stays whole and why.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

std::string src() { return testing::source_dir(); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// examples/batchnorm.hd with `shard{1=tp}` on its input: the channel split, written in the file.
std::string annotated_batchnorm() {
  std::string text = slurp(src() + "/examples/batchnorm.hd");
  const std::string decl = "input %img: f32[8, 16, 16, 16]";
  size_t at = text.find(decl);
  EXPECT_NE(at, std::string::npos);
  text.insert(at + decl.size(), " shard{1=tp}");
  std::string path = ::testing::TempDir() + "/batchnorm_tactic.hd";
  std::ofstream(path) << text;
  return path;
}

TEST(TacticCli, ATacticInTheFilePinsTheChannelSplitAndMatchesTheReference) {
  const std::string f = annotated_batchnorm();
  auto show = run_heddle("show " + f + " --mesh tp=4");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("%xc = sub {tp: c}"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("%y = mul {tp: c}"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("0 reshard(s)"), std::string::npos) << show.out;
  // The preset alone splits the image height: dim 1 looks like a sequence to it.
  auto preset = run_heddle("show " + src() + "/examples/batchnorm.hd --mesh tp=4");
  ASSERT_EQ(preset.exit_code, 0) << preset.err;
  EXPECT_NE(preset.out.find("%y = mul {tp: h}"), std::string::npos) << preset.out;
  for (const char* extra : {"", " --train"}) {
    auto run = run_heddle("run " + f + " --mesh tp=4 --check" + extra);
    EXPECT_EQ(run.exit_code, 0) << extra << run.err;
    EXPECT_NE(run.out.find("check      ok"), std::string::npos) << run.out;
  }
  // The text round trip keeps the tactic.
  std::string out = ::testing::TempDir() + "/batchnorm_tactic_out.hd";
  auto text = run_heddle("show " + f + " --text " + out);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(slurp(out).find("input %img: f32[8, 16, 16, 16] shard{1=tp}\n"), std::string::npos);
}

TEST(TacticCli, TheFlagPinsTheSameSplit) {
  auto r = run_heddle("run " + src() +
                      "/examples/batchnorm.hd --mesh tp=4 --tactic %img:1=tp --check --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["reshards"], 0);
  EXPECT_TRUE(j["idle_axes"].empty());
}

TEST(TacticCli, ConflictsAndBadTacticsNameTheirSources) {
  const std::string f = annotated_batchnorm();
  auto conflict = run_heddle("show " + f + " --mesh tp=4 --tactic %img=replicate");
  EXPECT_EQ(conflict.exit_code, 1);
  EXPECT_NE(conflict.err.find("conflicting tactics for %img on mesh axis tp: Shard(1) from " + f +
                              ":7, but Replicate from --tactic '%img=replicate'"),
            std::string::npos)
      << conflict.err;
  auto malformed = run_heddle("run " + src() + "/examples/batchnorm.hd --mesh 4 --tactic img:1=x");
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.err.find("expected a value name starting with '%'"), std::string::npos)
      << malformed.err;
  auto axis = run_heddle("show " + f + " --mesh 4");
  EXPECT_EQ(axis.exit_code, 1);
  EXPECT_NE(axis.err.find(f + ":7: the mesh x=4 has no axis 'tp'; its axes: x"), std::string::npos)
      << axis.err;
  // One device: nothing to split, the tactic is not in the way.
  EXPECT_EQ(run_heddle("run " + f + " --mesh 1 --check").exit_code, 0);
}

// Tactics pin decisions, the search completes the rest: under `--strategy auto` (the intra-op
// ILP) and in the stages of a pipeline (pp=2) the file's tactic gives the pinned split and the
// runs match the reference.
TEST(TacticCli, AutoAndPipelinesHonourTheTactics) {
  const std::string f = annotated_batchnorm();
  auto show = run_heddle("show " + f + " --mesh tp=4 --strategy auto --tactic %y:n=tp");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("%y = mul {tp: n}"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("with 2 tactic(s)"), std::string::npos) << show.out;
  for (const char* extra : {"", " --train --steps 2"}) {
    auto run =
        run_heddle("run " + f + " --mesh tp=4 --strategy auto --tactic %y:n=tp --check" + extra);
    EXPECT_EQ(run.exit_code, 0) << extra << run.err;
    EXPECT_NE(run.out.find("check      ok"), std::string::npos) << run.out;
    auto pipe = run_heddle("run " + f + " --mesh 4 --strategy pp=2,tp=2 --check" + extra);
    EXPECT_EQ(pipe.exit_code, 0) << extra << pipe.err;
    EXPECT_NE(pipe.out.find("check      ok"), std::string::npos) << pipe.out;
  }
  // Conflicts with the stage strategy's presets name both sources.
  auto conflict = run_heddle("run " + src() +
                             "/examples/batchnorm.hd --mesh 4 --strategy pp=2,dp=2 --tactic "
                             "%img:1=dp --check");
  EXPECT_EQ(conflict.exit_code, 1);
  EXPECT_NE(conflict.err.find("conflicting tactics for %img on mesh axis dp: Shard(0) from "
                              "--strategy dp=2 (a stage's strategy), but Shard(1) from "
                              "--tactic '%img:1=dp'"),
            std::string::npos)
      << conflict.err;
}

TEST(TacticCli, NamedAndShapedMeshesAreHonoured) {
  auto r = run_heddle("show " + src() + "/examples/mlp.hd --mesh 2x2 --strategy tp=4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--mesh 2x2 is a 2 x 2 mesh, but --strategy tp=4 arranges its 4 devices as "
                       "tp=4; give --mesh 4"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(
      run_heddle("show " + src() + "/examples/mlp.hd --mesh 2x2 --strategy dp=2,tp=2").exit_code,
      0);
}

// A lone 3-point stencil on 4 devices: splitting i would pay a halo fetch for too little compute
// (cost), and its reduce dim t=3 cannot give each of 4 devices a part (divisibility).
TEST(TacticCli, ShowAndRunSayWhatStaysWholeAndWhy) {
  const std::string f = ::testing::TempDir() + "/lone_stencil.hd";
  std::ofstream(f) << "graph g {\n  input %x: f32[66]\n"
                      "  %y: f32[64] = reduce_sum [i=64, t=3:sum] %x(i + t) -> (i)\n"
                      "  output %y\n}\n";
  auto show = run_heddle("show " + f + " --mesh 4");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("not split:\nmesh axis x=4 splits no op\n"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("i (cost): "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("t (divisibility): "), std::string::npos) << show.out;
  auto run = run_heddle("run " + f + " --mesh 4 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["idle_axes"], nlohmann::json::array({"x"}));
  ASSERT_EQ(j["unsplit_ops"].size(), 1u);
  const auto& first = j["unsplit_ops"][0];
  EXPECT_EQ(first["axis"], "x");
  EXPECT_EQ(first["op"], "reduce_sum");
  ASSERT_EQ(first["dims"].size(), 2u);
  EXPECT_EQ(first["dims"][0]["reason"], "cost");
  EXPECT_EQ(first["dims"][1]["reason"], "divisibility");
  auto text = run_heddle("run " + f + " --mesh 4");
  EXPECT_NE(text.out.find("not split  mesh axis x=4 splits no op"), std::string::npos) << text.out;
  // Attention on a mesh of 6 splits every op (uneven blocks): nothing to report.
  auto attn = run_heddle("show " + src() + "/examples/attention.hd --mesh 6");
  ASSERT_EQ(attn.exit_code, 0) << attn.err;
  EXPECT_EQ(attn.out.find("not split"), std::string::npos) << attn.out;
}

// `heddle plan` reports what its chosen stage plans leave whole: the mlp's logits on a100x8
// (dp=4,tp=2: tp may not split the batch, and splitting n or k costs more than it saves).
TEST(TacticCli, PlanSaysWhatStaysWholeAndWhy) {
  auto j = run_heddle("plan " + src() + "/examples/mlp.hd --cluster a100x8 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto plan = nlohmann::json::parse(j.out);
  ASSERT_EQ(plan["split_report"].size(), 1u) << plan["split_report"];
  const auto& stage = plan["split_report"][0];
  EXPECT_EQ(stage["mesh"], "dp=4,tp=2");
  EXPECT_TRUE(stage["idle_axes"].empty());
  ASSERT_FALSE(stage["unsplit_ops"].empty());
  const auto& logits = stage["unsplit_ops"][0];
  EXPECT_EQ(logits["result"], "logits");
  EXPECT_EQ(logits["axis"], "tp");
  EXPECT_EQ(logits["dims"][0]["dim"], "m");
  EXPECT_EQ(logits["dims"][0]["reason"], "role");
  auto text = run_heddle("plan " + src() + "/examples/mlp.hd --cluster a100x8");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("not split  stage mesh dp=4,tp=2:\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("op 'einsum' defining %logits"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace heddle
