// The bad-input catalogue (tests/bad_inputs/cli.cases): every command on malformed, truncated,
// inconsistent or infeasible input exits with the listed code and says the listed thing; no case
// crashes, hangs or reports an internal error.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "common/RunCli.h"

namespace heddle {
namespace {

using testing::run_heddle;

struct Case {
  std::string args;
  int exit_code = 0;
  std::string message;
};

// `ARGS => EXIT : STDERR-SUBSTRING` lines; blank lines and `#` comments skipped.
std::vector<Case> read_cases(const std::string& path) {
  std::vector<Case> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t arrow = line.find(" => "), colon = line.find(" : ", arrow);
    EXPECT_NE(arrow, std::string::npos) << line;
    EXPECT_NE(colon, std::string::npos) << line;
    if (arrow == std::string::npos || colon == std::string::npos) continue;
    out.push_back({.args = line.substr(0, arrow),
                   .exit_code = std::stoi(line.substr(arrow + 4, colon - arrow - 4)),
                   .message = line.substr(colon + 3)});
  }
  return out;
}

TEST(BadInputCli, EveryCaseExitsWithItsCodeAndMessage) {
  std::string dir = testing::source_dir() + "/tests/bad_inputs";
  auto cases = read_cases(dir + "/cli.cases");
  std::set<std::string> commands;
  for (const auto& c : cases) {
    auto r = run_heddle(c.args, dir, /*timeout_s=*/60);  // a hang exits 124, which no case expects
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.args << ": expected\n  " << c.message << "\nin\n  " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c.args << "\n" << r.err;
    if (c.exit_code != 0) {
      EXPECT_TRUE(r.out.empty()) << c.args << " printed to stdout: " << r.out;
    }
    commands.insert(c.args.substr(0, c.args.find(' ')));
  }
  EXPECT_GE(cases.size(), 90u);
  for (const char* cmd : {"show", "plan", "simulate", "run", "schedule", "calibrate"})
    EXPECT_TRUE(commands.count(cmd)) << "no case for heddle " << cmd;
}

}  // namespace
}  // namespace heddle
