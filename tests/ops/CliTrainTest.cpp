// `heddle run MODEL --mesh 1 --train --steps N`: the loss printed per step falls; bad requests
// exit 1 with a message.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Ran {
  int code = -1;
  std::string out;
};

Ran heddle(const std::string& args) {
  std::string cmd = std::string(HEDDLE_CLI_PATH) + " " + args + " 2>&1";
  Ran r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(CliTrain, LossFalls) {
  for (const char* model : {"gpt-tiny", "mlp --batch 8", "llama-tiny"}) {
    SCOPED_TRACE(model);
    Ran r = heddle(std::string("run ") + model + " --mesh 1 --train --steps 8 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    auto loss = j.at("loss").get<std::vector<double>>();
    ASSERT_EQ(loss.size(), 8u);
    EXPECT_LT(loss.back(), loss.front()) << r.out;
    EXPECT_TRUE(j.at("ok").get<bool>());
  }
}

TEST(CliTrain, TextOutputPrintsEveryStep) {
  Ran r = heddle("run gpt-tiny --mesh 1 --train --steps 3");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"step    1  loss", "step    2  loss", "step    3  loss"})
    EXPECT_NE(r.out.find(s), std::string::npos) << r.out;
}

TEST(CliTrain, BadRequestsExitOne) {
  Ran steps = heddle("run gpt-tiny --mesh 1 --train --steps 0");
  EXPECT_EQ(steps.code, 1);
  EXPECT_NE(steps.out.find("--steps must be >= 1"), std::string::npos);
  Ran big = heddle("run gpt3-175b --mesh 1 --train");
  EXPECT_EQ(big.code, 1);
  EXPECT_NE(big.out.find("to execute on this host"), std::string::npos);
  Ran heads = heddle("show gpt-tiny --heads 5");
  EXPECT_EQ(heads.code, 1);
  EXPECT_NE(heads.out.find("hidden 64 is not divisible by heads 5"), std::string::npos);
  Ran show = heddle("show gpt3-175b --train --json");
  ASSERT_EQ(show.code, 0) << show.out.substr(0, 400);
  EXPECT_GT(nlohmann::json::parse(show.out).at("flops").get<double>(), 2e15);
}

}  // namespace
