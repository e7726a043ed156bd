// Keeps the docs true to the binary: every `heddle` command in a fenced code block of README.md
// and docs/*.md runs (one test each, `Docs/DocCommands.RunAsDocumented/<doc>_line<N>`) and exits
// as the doc says (and prints the output the doc shows after a `$ heddle` line); every flag
// docs/cli.md lists exists in that subcommand's --help and every flag
// --help lists is in docs/cli.md; the model-taking commands' --help names every model kind; and
// no doc cites a file the repository does not hold.
//
// Marker convention (docs/cli.md, "Commands in these docs"): HTML comments on the lines right
// above a fence, invisible when the page is rendered:
//   <!-- doc-test: skip: REASON -->              the block's commands are not run
//   <!-- doc-test: skip "TEXT": REASON -->       its commands containing TEXT are not run
//   <!-- doc-test: exit N "TEXT" -->             its commands containing TEXT exit with N
// A marker whose TEXT matches no command of its block fails the test, so markers cannot go stale.
// Commands run in a scratch directory holding `examples/` (the repository's), `model.onnx` and
// `x.npy` (the cnn ONNX test fixture, fixed shapes as torchvision exports, and its input); lines
// that start with a launcher (`mpirun`, `srun`) are not run here (tests/tools/MpiCliTest.cpp runs
// the MPI backend).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "common/RunCli.h"

namespace heddle {
namespace {

namespace fs = std::filesystem;
using testing::run_heddle;

// Seconds one documented command may take, within the test budget (each command is its own
// test; a slow one is marked `skip` with the reason, or replaced by a quicker example).
constexpr int kCommandTimeoutS = 15;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

const std::vector<std::string> kCommands = {"show",     "run",      "plan",
                                            "simulate", "schedule", "calibrate"};

/// README.md and every docs/*.md, as paths relative to the source tree.
std::vector<std::string> doc_files() {
  std::vector<std::string> files = {"README.md"};
  for (const auto& e : fs::directory_iterator(testing::source_dir() + "/docs"))
    if (e.path().extension() == ".md") files.push_back("docs/" + e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

/// One `heddle` command of a doc's code block.
struct DocCommand {
  std::string doc;                  ///< README.md or docs/NAME.md
  int line = 0;                     ///< 1-based line of the command in the doc
  std::string args;                 ///< what follows `heddle`
  int exit_code = 0;                ///< as the doc states (default 0)
  bool skipped = false;             ///< a marker says not to run it
  bool prompt = false;              ///< shown as `$ heddle ...`, followed by its output
  std::vector<std::string> output;  ///< lines shown after a `$ heddle` command
};

/// A `<!-- doc-test: ... -->` marker above a fence.
struct Marker {
  int line = 0;
  std::string kind;  ///< "skip" or "exit"
  std::string text;  ///< empty: the whole block
  int exit_code = 0;
  std::string reason;
  bool used = false;
};

// Parses a marker comment; false when the line is not one. A malformed marker is added to
// `problems`.
bool parse_marker(const std::string& line, int number, const std::string& doc, Marker& m,
                  std::vector<std::string>& problems) {
  static const std::regex re(R"(^<!-- doc-test: (.*) -->$)");
  std::smatch match;
  if (!std::regex_match(line, match, re)) return false;
  static const std::regex skip_all(R"re(^skip: (\S.*)$)re"),
      skip_text(R"re(^skip "([^"]+)": (\S.*)$)re"), exit_text(R"re(^exit (\d+) "([^"]+)"$)re");
  std::smatch p;
  std::string body = match[1];
  m.line = number;
  if (std::regex_match(body, p, skip_all)) {
    m.kind = "skip", m.reason = p[1];
  } else if (std::regex_match(body, p, skip_text)) {
    m.kind = "skip", m.text = p[1], m.reason = p[2];
  } else if (std::regex_match(body, p, exit_text)) {
    m.kind = "exit", m.exit_code = std::stoi(p[1]), m.text = p[2];
  } else {
    problems.push_back(doc + ":" + std::to_string(number) + ": malformed doc-test marker: " + line);
    return false;
  }
  return true;
}

// The command a code-block line starts, without its prompt or binary path; empty when none.
std::string command_args(const std::string& line, bool& prompt) {
  std::string l = trim(line);
  prompt = starts_with(l, "$ ");
  if (prompt) l = l.substr(2);
  for (const char* bin :
       {"heddle ", "./build/tools/heddle/heddle ", "build/tools/heddle/heddle "}) {
    if (!starts_with(l, bin)) continue;
    std::string args = l.substr(std::string(bin).size());
    // A subcommand or an option must follow (`heddle d904b0c ...` is a report's header line).
    for (const std::string& cmd : kCommands)
      if (starts_with(args, cmd + " ") || args == cmd) return args;
    return starts_with(args, "--") ? args : "";
  }
  return "";
}

// Drops a trailing shell comment (`  # what it shows`).
std::string strip_comment(const std::string& s) {
  size_t hash = s.find(" #");
  return trim(hash == std::string::npos ? s : s.substr(0, hash));
}

/// Every `heddle` command in the fenced code blocks of `doc`, with its markers applied; malformed
/// or stale markers go to `problems`.
std::vector<DocCommand> doc_commands(const std::string& doc, std::vector<std::string>& problems) {
  std::vector<std::string> lines = lines_of(slurp(testing::source_dir() + "/" + doc));
  std::vector<DocCommand> commands;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!starts_with(trim(lines[i]), "```")) continue;
    std::vector<Marker> markers;
    for (size_t k = i; k > 0; --k) {
      Marker m;
      if (!parse_marker(trim(lines[k - 1]), static_cast<int>(k), doc, m, problems)) break;
      markers.push_back(m);
    }
    size_t end = i + 1;
    while (end < lines.size() && !starts_with(trim(lines[end]), "```")) ++end;
    std::vector<DocCommand> block;
    for (size_t j = i + 1; j < end; ++j) {
      bool prompt = false;
      std::string args = command_args(lines[j], prompt);
      if (args.empty()) {
        if (!block.empty() && block.back().prompt && !trim(lines[j]).empty() &&
            !starts_with(trim(lines[j]), "$"))
          block.back().output.push_back(lines[j]);
        continue;
      }
      DocCommand c;
      c.doc = doc;
      c.line = static_cast<int>(j + 1);
      c.prompt = prompt;
      while (!args.empty() && args.back() == '\\' && j + 1 < end)
        args = args.substr(0, args.size() - 1) + " " + trim(lines[++j]);
      c.args = strip_comment(args);
      block.push_back(c);
    }
    for (DocCommand& c : block) {
      for (Marker& m : markers) {
        if (!m.text.empty() && c.args.find(m.text) == std::string::npos) continue;
        m.used = true;
        if (m.kind == "skip") c.skipped = true;
        if (m.kind == "exit") c.exit_code = m.exit_code;
      }
      commands.push_back(c);
    }
    for (const Marker& m : markers)
      if (!m.used)
        problems.push_back(doc + ":" + std::to_string(m.line) +
                           ": the doc-test marker matches no command of its block (a stale "
                           "marker, or a block without commands)");
    i = end;
  }
  return commands;
}

std::vector<DocCommand> doc_commands(const std::string& doc) {
  std::vector<std::string> ignored;
  return doc_commands(doc, ignored);
}

/// Every documented command of every doc: one test each, so each has the test time budget.
std::vector<DocCommand> all_doc_commands() {
  std::vector<DocCommand> all;
  for (const std::string& doc : doc_files())
    for (DocCommand& c : doc_commands(doc)) all.push_back(std::move(c));
  return all;
}

std::string case_name(const DocCommand& c) {
  std::string n = c.doc + "_line" + std::to_string(c.line);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// A scratch directory in which the documented relative paths exist; the process id keeps two
// test runs on one machine (two checkouts) out of each other's way.
std::string scratch_dir(const DocCommand& c) {
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("heddle_doc_command_" + std::to_string(::getpid()) + "_" + case_name(c));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = testing::source_dir();
  fs::create_directory_symlink(src + "/examples", dir / "examples");
  fs::create_symlink(src + "/tests/data/cnn.onnx", dir / "model.onnx");
  fs::create_symlink(src + "/tests/data/cnn.in.npy", dir / "x.npy");
  return dir.string();
}

// How gtest names a case in its listings: where it is and what it runs.
void PrintTo(const DocCommand& c, std::ostream* os) {
  *os << c.doc << ":" << c.line << ": heddle " << c.args;
}

class DocCommands : public ::testing::TestWithParam<DocCommand> {};

TEST_P(DocCommands, RunAsDocumented) {
  const DocCommand& c = GetParam();
  if (c.skipped) GTEST_SKIP() << "marked `doc-test: skip` in " << c.doc;
  SCOPED_TRACE(c.doc + ":" + std::to_string(c.line) + ": heddle " + c.args);
  const std::string dir = scratch_dir(c);
  auto r = run_heddle(c.args, dir, kCommandTimeoutS);
  fs::remove_all(dir);
  ASSERT_NE(r.exit_code, 124) << "took longer than " << kCommandTimeoutS
                              << " s: mark it `skip` with the reason, or document a quicker one";
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  for (const std::string& want : c.output) {
    // Timings differ between runs; every other line the doc shows must be printed as shown.
    if (want.find("time") != std::string::npos) continue;
    EXPECT_NE(r.out.find(want), std::string::npos) << "the doc shows\n"
                                                   << want << "\ngot\n"
                                                   << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Docs, DocCommands, ::testing::ValuesIn(all_doc_commands()),
                         [](const ::testing::TestParamInfo<DocCommand>& info) {
                           return case_name(info.param);
                         });

TEST(DocCommandsParser, MarkersAreWellFormedAndEachMatchesACommand) {
  for (const std::string& doc : doc_files()) {
    std::vector<std::string> problems;
    doc_commands(doc, problems);
    for (const std::string& p : problems) ADD_FAILURE() << p;
  }
}

TEST(DocCommandsParser, FindsTheToursCommandsAndHonoursMarkers) {
  std::vector<DocCommand> readme = doc_commands("README.md");
  ASSERT_GE(readme.size(), 10u);  // the tour
  EXPECT_EQ(readme.front().args, "show gpt3-175b");
  for (const DocCommand& c : readme) EXPECT_EQ(c.args.find('#'), std::string::npos) << c.args;
  std::vector<DocCommand> cli = doc_commands("docs/cli.md");
  ASSERT_FALSE(cli.empty());
  for (const DocCommand& c : cli)
    EXPECT_TRUE(c.skipped) << "docs/cli.md's synopsis is marked as not commands: " << c.args;
  int with_output = 0;
  for (const DocCommand& c : doc_commands("docs/pipeline.md")) with_output += !c.output.empty();
  EXPECT_GE(with_output, 1) << "pipeline.md shows a schedule's output after `$ heddle schedule`";
}

// ---------------------------------------------------------------------------------------------
// docs/cli.md's flags against --help.

std::set<std::string> flags_in(const std::string& text) {
  static const std::regex re(R"(--[a-z][a-z0-9-]*)");
  std::set<std::string> flags;
  for (std::sregex_iterator it(text.begin(), text.end(), re), e; it != e; ++it)
    flags.insert(it->str());
  return flags;
}

/// Per subcommand, the flags docs/cli.md gives it: its synopsis line(s) in "Commands" and the rows
/// of the option tables whose first cell names it; under "heddle", the rows for `all` (options
/// of the command line as a whole, which `heddle --help` lists).
std::map<std::string, std::set<std::string>> documented_flags() {
  std::map<std::string, std::set<std::string>> flags;
  std::vector<std::string> lines = lines_of(slurp(testing::source_dir() + "/docs/cli.md"));
  std::string current;
  bool synopsis = false;
  for (const std::string& raw : lines) {
    std::string l = trim(raw);
    if (starts_with(l, "```")) {
      synopsis = false, current.clear();
      continue;
    }
    if (starts_with(l, "heddle ")) {
      std::string cmd = l.substr(7, l.find(' ', 7) - 7);
      if (std::find(kCommands.begin(), kCommands.end(), cmd) != kCommands.end())
        synopsis = true, current = cmd;
    }
    if (synopsis && !current.empty()) {
      auto f = flags_in(l);
      flags[current].insert(f.begin(), f.end());
    }
    if (starts_with(l, "|") && !synopsis) {
      for (size_t at; (at = l.find("\\|")) != std::string::npos;) l.replace(at, 2, "/");
      size_t bar = l.find('|', 1);
      if (bar == std::string::npos) continue;
      std::string who = l.substr(1, bar - 1);
      size_t bar2 = l.find('|', bar + 1);
      std::string option = l.substr(bar + 1, bar2 - bar - 1);
      auto f = flags_in(option);
      if (trim(who) == "all") flags["heddle"].insert(f.begin(), f.end());
      for (const std::string& cmd : kCommands)
        if (who.find("`" + cmd + "`") != std::string::npos) flags[cmd].insert(f.begin(), f.end());
    }
  }
  return flags;
}

/// The flags `heddle CMD --help` lists (the first name of each option line); `heddle --help` for
/// "heddle".
std::set<std::string> help_flags(const std::string& cmd) {
  auto r = run_heddle(cmd == "heddle" ? "--help" : cmd + " --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  static const std::regex re(R"(^\s+(?:-[a-zA-Z],)?(--[a-z][a-z0-9-]*))");
  std::set<std::string> flags;
  for (const std::string& l : lines_of(r.out)) {
    std::smatch m;
    if (std::regex_search(l, m, re) && m[1] != "--help") flags.insert(m[1]);
  }
  return flags;
}

TEST(DocsCli, EveryDocumentedFlagIsInHelpAndEveryHelpFlagIsDocumented) {
  auto documented = documented_flags();
  std::vector<std::string> all = kCommands;
  all.push_back("heddle");
  for (const std::string& cmd : all) {
    SCOPED_TRACE("heddle " + cmd);
    std::set<std::string> help = help_flags(cmd);
    ASSERT_FALSE(help.empty());
    for (const std::string& f : documented[cmd])
      EXPECT_TRUE(help.count(f)) << "docs/cli.md gives `" << cmd << "` the flag " << f
                                 << ", which its --help does not list";
    for (const std::string& f : help)
      EXPECT_TRUE(documented[cmd].count(f))
          << "`heddle " << cmd << " --help` lists " << f
          << ", which docs/cli.md does not give the command (synopsis or option table)";
  }
}

// The run flags docs/cli.md says are not implemented yet are indeed not in `run --help` (so the
// sentence is corrected when they arrive).
TEST(DocsCli, FlagsDocumentedAsMissingAreMissing) {
  std::string bullet;
  for (const std::string& l : lines_of(slurp(testing::source_dir() + "/docs/cli.md"))) {
    if (starts_with(l, "- Not implemented yet"))
      bullet = l;
    else if (!bullet.empty() && starts_with(l, "  "))
      bullet += l;
    else if (!bullet.empty())
      break;
  }
  if (bullet.empty()) return;  // cli.md claims no missing flags
  std::set<std::string> missing = flags_in(bullet.substr(0, bullet.find(". heddle refuses")));
  EXPECT_FALSE(missing.empty()) << "the bullet names the missing flags before `. heddle refuses`";
  std::set<std::string> help = help_flags("run");
  for (const std::string& f : missing)
    EXPECT_FALSE(help.count(f)) << "docs/cli.md says run has no " << f << " yet, but it has";
}

TEST(DocsCli, ModelCommandsHelpNamesEveryModelKind) {
  for (const char* cmd : {"show", "run", "plan", "simulate"}) {
    auto r = run_heddle(std::string(cmd) + " --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* kind : {"zoo", ".onnx", "text-IR", ".hd"})
      EXPECT_NE(r.out.find(kind), std::string::npos) << "heddle " << cmd << " --help: " << kind;
    // Help cites the repository's docs (it said "see CLI.md", a file outside the repository).
    EXPECT_EQ(r.out.find("CLI.md"), std::string::npos) << "heddle " << cmd << " --help";
  }
  // The exit code of a failed --check is 3 (docs/cli.md, "Exit codes"), as --help says.
  auto run = run_heddle("run --help");
  EXPECT_NE(run.out.find("exit 3 on mismatch"), std::string::npos) << run.out;
}

// docs/cli.md, "Logging": with --json, stdout holds the result object and stderr only JSON lines
// (plan's progress, its warnings, simulate's cluster line and failures were plain text before).
TEST(DocsCli, JsonLeavesOnlyJsonLinesOnStderr) {
  for (const char* args :
       {"plan gpt-tiny --cluster a100x8 --json --log-level info",
        "plan gpt-tiny --cluster a100x8 --train --batch 8 --json --export megatron --log-level "
        "info",
        "simulate gpt-tiny --cluster a100x8 --strategy dp=2,tp=4 --batch 4 --json --log-level info",
        "simulate gpt3-175b --cluster a100x8 --strategy tp=8 --train --json",
        "schedule --placement vshape --devices 4 --micro-batches 4 --memory 2 --baseline gpipe "
        "--json"}) {
    SCOPED_TRACE(args);
    auto r = run_heddle(args);
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
    int records = 0;
    for (const std::string& l : lines_of(r.err)) {
      EXPECT_TRUE(nlohmann::json::accept(l)) << "not a JSON line on stderr: " << l;
      ++records;
    }
    EXPECT_GT(records, 0) << "each of these writes a progress, warning or failure record";
  }
}

// The names after `marker` in `text`, up to the end of its line, split at ", " and " or ".
std::vector<std::string> listed_after(const std::string& text, const std::string& marker) {
  std::vector<std::string> names;
  size_t at = text.find(marker);
  if (at == std::string::npos) return names;
  std::string list = text.substr(at + marker.size());
  list = list.substr(0, list.find_first_of(";\n"));
  static const std::regex sep(", | or ");
  for (std::sregex_token_iterator it(list.begin(), list.end(), sep, -1), e; it != e; ++it)
    if (!trim(*it).empty()) names.push_back(trim(*it));
  return names;
}

// The vocabularies the binary's diagnostics list (strategy keys, placements, device presets) are
// the ones docs/cli.md names, `cp` included.
TEST(DocsCli, StrategyKeysPlacementsAndDevicesAreTheOnesDocumented) {
  const std::string cli = slurp(testing::source_dir() + "/docs/cli.md");
  auto keys = run_heddle("simulate gpt-tiny --cluster a100x2 --strategy nosuchkey=1");
  EXPECT_EQ(keys.exit_code, 1);
  std::vector<std::string> valid = listed_after(keys.err, "valid keys: ");
  ASSERT_GE(valid.size(), 10u) << keys.err;
  for (const std::string& k : valid)  // `zero` or `meshes=...`
    EXPECT_TRUE(cli.find("`" + k + "`") != std::string::npos ||
                cli.find("`" + k + "=") != std::string::npos)
        << "strategy key " << k;
  // Every key of the contract is taken now (`cp` was the last one cli.md said was missing).
  EXPECT_NE(std::find(valid.begin(), valid.end(), "cp"), valid.end()) << keys.err;
  EXPECT_EQ(cli.find("does not take it yet"), std::string::npos);
  auto placements = run_heddle(
      "schedule --placement nosuch --devices 2 --micro-batches 2 "
      "--memory 2");
  std::vector<std::string> shapes = listed_after(placements.err, "use one of ");
  ASSERT_GE(shapes.size(), 7u) << placements.err;
  for (const std::string& s : shapes) {
    if (s == "a JSON placement file") continue;
    EXPECT_NE(cli.find("`" + s + "`"), std::string::npos) << "placement " << s;
  }
  auto devices = run_heddle("simulate gpt-tiny --cluster tpux8 --strategy dp=2");
  std::vector<std::string> presets = listed_after(devices.err, "known devices: ");
  ASSERT_GE(presets.size(), 6u) << devices.err;
  for (const std::string& d : presets)
    EXPECT_NE(cli.find("`" + d + "`"), std::string::npos) << "device preset " << d;
}

// export.md, "Memory reserve": the reserve is the allocator allowance's runtime part, 2 GB of an
// 80 GB A100 by default, counted in the peak; nothing is taken off the device's memory by plan
// or by simulate (docs/cli.md, `assumes`). A given reserve replaces the 2 GB.
TEST(DocsCli, TheMemoryReserveIsAsDocumented) {
  auto plan = run_heddle("plan gpt-tiny --cluster a100x8 --batch 8 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto j = nlohmann::json::parse(plan.out);
  EXPECT_DOUBLE_EQ(j["memory_reserve_bytes"].get<double>(), 2e9);
  EXPECT_DOUBLE_EQ(j["memory_limit_bytes"].get<double>(), 80e9);
  auto six = run_heddle("plan gpt-tiny --cluster a100x8 --batch 8 --memory-reserve 6GB --json");
  ASSERT_EQ(six.exit_code, 0) << six.err;
  auto k = nlohmann::json::parse(six.out);
  EXPECT_DOUBLE_EQ(k["memory_reserve_bytes"].get<double>(), 6e9);
  EXPECT_DOUBLE_EQ(k["peak_memory_bytes"].get<double>() - j["peak_memory_bytes"].get<double>(),
                   4e9);
  auto sim = run_heddle("simulate gpt-tiny --cluster a100x8 --strategy dp=8 --batch 8 --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["memory_limit_bytes"].get<double>(), 80e9);
}

// ops.md's zoo table: every preset given an exact parameter count has that many (`show --json`).
TEST(DocsCli, ZooTableParameterCountsAreTheModels) {
  static const std::regex row(R"(^\| ([a-z0-9.-]+) \| ([0-9,]+) \|)");
  int checked = 0;
  for (const std::string& l : lines_of(slurp(testing::source_dir() + "/docs/ops.md"))) {
    std::smatch m;
    if (!std::regex_search(l, m, row)) continue;
    std::string digits = m[2];
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    auto r = run_heddle("show " + m[1].str() + " --json");
    ASSERT_EQ(r.exit_code, 0) << m[1] << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["parameters"].get<int64_t>(), std::stoll(digits))
        << "docs/ops.md's zoo table, " << m[1];
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

// The first ```json block after `heading` in docs/cli.md.
std::string json_example(const std::string& heading) {
  std::vector<std::string> lines = lines_of(slurp(testing::source_dir() + "/docs/cli.md"));
  std::string text;
  bool section = false, block = false;
  for (const std::string& l : lines) {
    if (starts_with(l, "## ")) section = starts_with(l, heading);
    if (!section) continue;
    if (block && starts_with(l, "```")) return text;
    if (block) text += l + "\n";
    if (starts_with(l, "```json")) block = true;
  }
  ADD_FAILURE() << "docs/cli.md has no ```json example under " << heading;
  return text;
}

// docs/cli.md's placement and cluster file examples are files heddle takes as they are shown.
TEST(DocsCli, TheFileFormatExamplesWork) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream(dir + "/doc_placement.json") << json_example("## Placement files");
    std::ofstream(dir + "/doc_cluster.json") << json_example("## Cluster files");
  }
  auto s = run_heddle("schedule --placement " + dir + "/doc_placement.json --micro-batches 4 " +
                      "--memory 4 --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["devices"], 4);
  auto c = run_heddle("simulate gpt-tiny --cluster " + dir +
                      "/doc_cluster.json --strategy dp=64 --batch 64 --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(nlohmann::json::parse(c.out)["cluster_source"].get<std::string>().find("file"),
            std::string::npos);
}

// Every key the JSON outputs and plan.json hold (nested objects and the entries of lists of
// objects too) is named in docs/cli.md as `key`: nothing a script may read is undocumented.
void collect_keys(const nlohmann::json& j, const std::string& path,
                  std::map<std::string, std::string>& keys) {
  if (j.is_array()) {
    for (const auto& e : j) collect_keys(e, path + "[]", keys);
    return;
  }
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) {
    keys.emplace(k, path + "." + k);
    // Keys of these are data (dimension names, link classes, the export's own format).
    if (k == "rank_groups" || k == "link_bytes" || k == "export") continue;
    collect_keys(v, path + "." + k, keys);
  }
}

TEST(DocsCli, EveryJsonKeyIsDocumented) {
  const std::string cli = slurp(testing::source_dir() + "/docs/cli.md");
  const std::string dir = ::testing::TempDir() + "/heddle_doc_json_keys";
  fs::remove_all(dir);
  std::map<std::string, std::string> keys;
  for (const std::string& args :
       {"plan gpt3-1.3b --cluster v100x6 --layers 8 --vocab 250000 --batch 16 --train --json "
        "--compare pp=3,dp=2 --out " +
            dir,
        std::string("simulate gpt3-1.3b --cluster v100x4 --layers 8 --batch 16 --train "
                    "--strategy pp=2,dp=2 --json"),
        std::string("run gpt-tiny --batch 4 --mesh 4 --strategy pp=2,dp=2 --train --steps 1 "
                    "--check --json"),
        std::string("run gpt-tiny --mesh 2 --strategy dp=2 --train --steps 1 --check --json"),
        std::string("schedule --placement vshape --devices 4 --micro-batches 8 --memory 4 --json"),
        std::string("show gpt-tiny --json")}) {
    auto r = run_heddle(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    collect_keys(nlohmann::json::parse(r.out), args.substr(0, args.find(' ')), keys);
  }
  collect_keys(nlohmann::json::parse(slurp(dir + "/plan.json")), "plan.json", keys);
  for (const auto& [key, where] : keys)
    EXPECT_NE(cli.find("`" + key + "`"), std::string::npos)
        << where << ": docs/cli.md does not name the JSON key `" << key << "`";
}

// ---------------------------------------------------------------------------------------------
// Files the docs cite.

/// Every file name under the source tree (for bare names such as `DeviceProfile.h`).
std::set<std::string> repo_file_names() {
  std::set<std::string> names;
  const fs::path root = testing::source_dir();
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name == ".git" || starts_with(name, "build"))) {
      it.disable_recursion_pending();
      continue;
    }
    names.insert(name);
  }
  return names;
}

// Whether a cited path exists: from the root, from docs/, under include/ (`heddle/ops/Ops.h`,
// `runtime/HostMemory.h`) or src/ (`cost/Simulator.cpp`); a bare name anywhere in the tree. Files
// of the upstream projects export.md names its flags from (Megatron-LM, torchtitan, DeepSpeed)
// are cited with their repository, not as files of this one.
bool cited_file_exists(const std::string& cited, const std::set<std::string>& names) {
  const fs::path root = testing::source_dir();
  if (cited.find('/') == std::string::npos) return names.count(cited) > 0;
  for (const char* upstream : {"megatron/", "torchtitan/", "deepspeed/"})
    if (starts_with(cited, upstream)) return true;
  std::string p = cited.substr(0, cited.find(':'));  // `tests/cost/X.cpp:Name`
  for (const fs::path& base :
       {root, root / "docs", root / "include", root / "include/heddle", root / "src"})
    if (fs::exists(base / p)) return true;
  return false;
}

TEST(DocsCli, CiteOnlyFilesInTheRepository) {
  const std::set<std::string> names = repo_file_names();
  // Backticked or linked sources and docs, and paths into the tree's top-level directories.
  static const std::regex code(R"(`([A-Za-z0-9_./-]+\.(?:h|cpp|md|py|cmake))`)");
  static const std::regex link(R"(\]\(([^)#]+)\))");
  static const std::regex tree(
      R"(`((?:include|src|tests|tools|bench|scripts|examples|python|fuzz|docs)/[A-Za-z0-9_./-]*)`)");
  static const std::regex outside(R"(\.\./shared|/work/)");
  for (const std::string& doc : doc_files()) {
    const std::string text = slurp(testing::source_dir() + "/" + doc);
    int n = 0;
    for (const std::string& line : lines_of(text)) {
      ++n;
      EXPECT_FALSE(std::regex_search(line, outside))
          << doc << ":" << n << " cites a file outside the repository: " << line;
      for (const std::regex* re : {&code, &link, &tree}) {
        for (std::sregex_iterator it(line.begin(), line.end(), *re), e; it != e; ++it) {
          std::string cited = (*it)[1];
          if (starts_with(cited, "http")) continue;
          EXPECT_TRUE(cited_file_exists(cited, names))
              << doc << ":" << n << " cites `" << cited << "`, which the repository does not hold";
        }
      }
    }
  }
}

}  // namespace
}  // namespace heddle
