// The text form: print(parse(text)) == text, positions in parse errors, and robustness against
// garbage, truncation and random mutation.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "common/RandomGraph.h"
#include "heddle/ir/DotExport.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"

namespace heddle {
namespace {

std::string source_dir() { return HEDDLE_SOURCE_DIR; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The examples without their leading comment lines, which the printer does not keep.
std::string strip_comments(const std::string& text) {
  std::stringstream in(text), out;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("#", 0) != 0) out << line << "\n";
  return out.str();
}

TEST(TextForm, ExamplesRoundTripExactly) {
  for (const char* name : {"mlp", "convnet", "attention", "batchnorm"}) {
    std::string path = source_dir() + "/examples/" + name + ".hd";
    std::string text = strip_comments(read(path));
    ASSERT_FALSE(text.empty()) << path;
    auto g = parse_graph(text, path);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_TRUE(verify(*g).empty()) << verify(*g).front().to_string();
    EXPECT_EQ(print_graph(*g), text) << path;
  }
}

TEST(TextForm, TacticsRoundTrip) {
  const std::string text =
      "graph t {\n"
      "  input %x: f32[8, 4] shard{0=dp}\n"
      "  param %w: f32[4, 6] replicate\n"
      "  param %\"odd/name\": f32[6] shard{0=\"axis/2\", 0=tp}\n"
      "  %h: f32[8, 6] shard{1=tp} = einsum{spec=\"mk,kn->mn\"} [m=8, n=6, k=4:sum] %x(m, k), "
      "%w(k, "
      "n) -> (m, n) split{n=tp, m=dp}\n"
      "  %y: f32[8, 6] = add [m=8, n=6] %h(m, n), %\"odd/name\"(n) -> (m, n) replicate\n"
      "  output %y\n"
      "}\n";
  auto g = parse_graph(text, "t.hd");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_TRUE(verify(*g).empty());
  EXPECT_EQ(print_graph(*g), text);
  const Value& x = g->value(*g->find_value("x"));
  EXPECT_EQ(x.tactic.pins, (std::vector<AxisPin>{{0, "dp"}}));
  EXPECT_EQ(x.tactic.line, 2);
  EXPECT_TRUE(g->value(*g->find_value("w")).tactic.replicate);
  EXPECT_EQ(g->op(0).tactic.pins, (std::vector<AxisPin>{{1, "tp"}, {0, "dp"}}));
  EXPECT_TRUE(g->op(1).tactic.replicate);
  EXPECT_TRUE(g->value(*g->find_value("y")).tactic.empty());
}

TEST(TextForm, RandomGraphsRoundTrip) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Graph g = testing::random_graph(30, seed, /*odd_names=*/seed % 2 == 0);
    auto diags = verify(g);
    ASSERT_TRUE(diags.empty()) << "seed " << seed << ": " << diags.front().to_string() << "\n"
                               << print_graph(g);
    std::string text = print_graph(g);
    auto back = parse_graph(text, "random.hd");
    ASSERT_TRUE(back.ok()) << back.error().to_string() << "\n" << text;
    EXPECT_TRUE(verify(*back).empty());
    EXPECT_EQ(print_graph(*back), text);
    ASSERT_EQ(back->num_ops(), g.num_ops());
    for (OpId i = 0; i < g.num_ops(); ++i) {
      EXPECT_EQ(back->op(i).space, g.op(i).space);
      EXPECT_EQ(back->op(i).attrs, g.op(i).attrs);
      for (size_t k = 0; k < g.op(i).inputs.size(); ++k) {
        const Operand &x = back->op(i).inputs[k], &y = g.op(i).inputs[k];
        EXPECT_EQ(x.proj, y.proj);
        EXPECT_EQ(x.padded, y.padded);
        EXPECT_EQ(back->value(x.value).name, g.value(y.value).name);
      }
    }
  }
}

TEST(TextForm, AttributesOfEveryTypeRoundTrip) {
  const char* text =
      "graph \"odd name\" {\n"
      "  input %\"in/x:0\": f32[4]\n"
      "  %y: f32[4] = scale{alpha=0.5} [i=4] %\"in/x:0\"(i) -> (i)\n"
      "  %z: f32[4] = scale{alpha=1e-05} [i=4] %y(i) -> (i)\n"
      "  %w: f32[4] = scale{alpha=-3.0} [i=4] %z(i) -> (i)\n"
      "  %e: f32[4] = einsum{spec=\"i->i \\\"q\\\"\"} [i=4] %w(i) -> (i)\n"
      "  %s: f32[] = reduce_sum [i=4:sum] %e(i) -> ()\n"
      "  output %s, %w\n"
      "}\n";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(print_graph(*g), text);
  EXPECT_EQ(std::get<double>(g->op(1).attrs.at("alpha")), 1e-5);
  EXPECT_EQ(std::get<std::string>(g->op(3).attrs.at("spec")), "i->i \"q\"");
}

TEST(TextForm, IntegerAttributeForFloatIsAccepted) {
  auto g =
      parse_graph("graph g { input %x: f32[2]\n %y: f32[2] = scale{alpha=2} [i=2] %x(i) -> (i) }");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(std::get<double>(g->op(0).attrs.at("alpha")), 2.0);
}

struct BadCase {
  const char* text;
  int line;
  const char* at;       // the diagnostic points at the first occurrence of this on its line
  const char* message;  // a substring the message must contain
};

TEST(TextForm, ParseErrorsCarryPositionsAndSayWhatIsWrong) {
  const BadCase cases[] = {
      {"", 1, "", "expected 'graph' but found end of file"},
      {"graph g {\n  input %x: f32[2]\n", 3, "", "expected '}' to close the graph"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = frobnicate [i=2] %x(i) -> (i)\n}", 3,
       "frobnicate", "unknown op 'frobnicate'; known ops: einsum, relu"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu{alpha=1} [i=2] %x(i) -> (i)\n}", 3,
       "alpha", "op 'relu' has no attribute 'alpha'; it takes no attributes"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = scale{beta=1.0} [i=2] %x(i) -> (i)\n}", 3,
       "beta", "op 'scale' has no attribute 'beta'; it accepts: alpha"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = einsum{spec=3} [i=2] %x(i) -> (i)\n}", 3,
       "3}", "attribute 'spec' of 'einsum' must be a string, got 3"},
      {"graph g {\n  input %x: f32[2]\n  input %x: f32[3]\n}", 3, "%x",
       "value '%x' is already defined at line 2"},
      {"graph g {\n  %y: f32[2] = relu [i=2] %x(i) -> (i)\n}", 2, "%x",
       "use of undefined value '%x'"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(q) -> (i)\n}", 3, "q)",
       "'q' is not a dim of the index space [i]"},
      {"graph g {\n  input %x: q32[2]\n}", 2, "q32", "unknown element type 'q32'"},
      {"graph g {\n  input %x: f32[2, -1]\n}", 2, "-1", "tensor dim must not be negative"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2, i=3] %x(i) -> (i)\n}", 3, "i=3",
       "index dim 'i' is declared twice"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(i)[1, 2] -> (i)\n}", 3,
       "[1, 2]", "window has 2 dims but the projection has 1"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2], %z: f32[2] = relu [i=2] %x(i) -> (i)\n}", 3,
       "relu", "defines 2 result(s) but gives 1 result projection(s)"},
      {"graph g {\n  input %x: f32[99999999999999999999]\n}", 2, "999", "is too large"},
      {"graph g {\n  input %x: f32[2]\x01\n}", 2, "\x01", "unexpected byte 0x01"},
      {"graph g {\n  input %x: f32[2]\n} trailing", 3, "trailing",
       "unexpected 'trailing' after the graph"},
      {"graph g {\n  %y: f32[2] = relu [i=2:avg] -> (i)\n}", 2, "avg",
       "expected a reduction 'sum', 'max' or 'min'"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = einsum{spec=\"abc} [i=2] %x(i) -> (i)\n}", 3,
       "\"abc", "unterminated string"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(i) -> (i) padded\n}", 3,
       "(i) padded", "'padded' applies to inputs only"},
      {"graph g {\n  bogus\n}", 2, "bogus",
       "expected 'input', 'param', 'output' or an op definition"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(2x) -> (i)\n}", 3, "2x",
       "malformed number '2x'"},
      // Tactics: dims in range, the right keyword where it belongs, each axis once.
      {"graph g {\n  input %x: f32[2, 4] shard{2=tp}\n}", 2, "2=tp",
       "tensor dim 2 in shard{...} is outside the 2 dims of the value"},
      {"graph g {\n  input %x: f32[2] split{i=tp}\n}", 2, "split",
       "a value's tactic is 'shard{tensor_dim=axis}'"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(i) -> (i) shard{0=tp}\n}", 3,
       "shard", "an op's tactic is 'split{index_dim=axis}'"},
      {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu [i=2] %x(i) -> (i) split{j=tp}\n}", 3,
       "j=tp", "'j' is not a dim of the index space [i]"},
      {"graph g {\n  input %x: f32[4, 4] shard{0=tp, 1=tp}\n}", 2, "tp}",
       "mesh axis 'tp' is pinned twice in one shard{...}"},
      {"graph g {\n  input %x: f32[2] shard{}\n}", 2, "}",
       "empty shard{}: name at least one dim=axis, or write 'replicate'"},
  };
  for (const auto& c : cases) {
    auto g = parse_graph(c.text, "bad.hd");
    ASSERT_FALSE(g.ok()) << c.text;
    const Diagnostic& d = g.error();
    std::string text = c.text, line;
    std::stringstream lines(text);
    for (int i = 0; i < c.line; ++i) std::getline(lines, line);
    int col = std::string(c.at).empty() ? 1 : static_cast<int>(line.find(c.at)) + 1;
    ASSERT_GT(col, 0) << "bad test: '" << c.at << "' not on line " << c.line;
    EXPECT_EQ(d.loc.file, "bad.hd");
    EXPECT_EQ(d.loc.line, c.line) << c.text << "\n" << d.to_string();
    EXPECT_EQ(d.loc.col, col) << c.text << "\n" << d.to_string();
    EXPECT_NE(d.message.find(c.message), std::string::npos)
        << "expected '" << c.message << "' in: " << d.to_string();
    EXPECT_EQ(d.to_string(), "bad.hd:" + std::to_string(c.line) + ":" + std::to_string(col) +
                                 ": error: " + d.message);
  }
}

TEST(TextForm, MissingFileAndDirectoryAreDiagnostics) {
  auto g = parse_graph_file("/nonexistent/model.hd");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(
      g.error().to_string(),
      "/nonexistent/model.hd: error: cannot open the text-IR file: No such file or directory");
  auto d = parse_graph_file("/tmp");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("directory"), std::string::npos);
}

// Every prefix of a valid file, and thousands of random byte mutations, parse to a graph or a
// diagnostic; whatever parses also verifies without crashing and prints.
TEST(TextForm, TruncationsAndMutationsNeverCrash) {
  std::string text = print_graph(testing::random_graph(12, 7, true));
  for (size_t n = 0; n < text.rfind('}'); ++n) {
    auto g = parse_graph(text.substr(0, n));
    EXPECT_FALSE(g.ok()) << "prefix of length " << n << " parsed";
  }
  std::mt19937_64 rng(99);
  const std::string alphabet =
      "%[](){},:=+-*#\"0123456789ijmnk \n\x00\xff"
      "graphinputf32padded";
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string m = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % m.size();
      switch (rng() % 3) {
        case 0:
          m[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          m.erase(pos, 1 + rng() % 5);
          break;
        default:
          m.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
      if (m.empty()) m = "x";
    }
    auto g = parse_graph(m);
    if (!g.ok()) {
      EXPECT_FALSE(g.error().message.empty());
      continue;
    }
    ++parsed;
    auto diags = verify(*g);
    (void)print_graph(*g);
    for (const auto& d : diags) EXPECT_FALSE(d.message.empty());
  }
  EXPECT_GT(parsed, 0);
}

TEST(Dot, NamesEveryOpAndEdge) {
  Graph g = testing::random_graph(10, 3);
  std::string dot = to_dot(g);
  EXPECT_EQ(dot.rfind("digraph \"random_3\" {", 0), 0u);
  for (OpId i = 0; i < g.num_ops(); ++i)
    EXPECT_NE(dot.find("  op" + std::to_string(i) + " [shape=box"), std::string::npos);
  size_t edges = 0;
  for (size_t p = dot.find(" -> "); p != std::string::npos; p = dot.find(" -> ", p + 1)) ++edges;
  size_t expected = g.outputs().size();
  for (const Op& op : g.ops()) expected += op.inputs.size();
  EXPECT_EQ(edges, expected);
}

}  // namespace
}  // namespace heddle
