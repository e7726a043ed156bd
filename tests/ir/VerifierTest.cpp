// The verifier: each broken rule gives one diagnostic naming the op, the operand and the rule.
#include <gtest/gtest.h>

#include "common/RandomGraph.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/Verifier.h"

namespace heddle {
namespace {

std::vector<Diagnostic> verify_text(const std::string& body) {
  auto g = parse_graph("graph g {\n" + body + "\n}\n", "v.hd");
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  if (!g.ok()) return {};
  return verify(*g);
}

struct Case {
  const char* body;
  const char* message;
};

TEST(Verifier, EachRuleBreakIsOneDiagnostic) {
  const Case cases[] = {
      {"input %a: f32[4, 3]\n input %b: f32[4, 5]\n"
       " %c: f32[4, 5] = einsum{spec=\"mk,kn->mn\"} [m=4, n=5, k=4:sum] %a(m, k), %b(k, n) -> (m, "
       "n)",
       "op 'einsum' defining %c: input 0 (%a): projection (m, k) reads [0:4, 0:4], outside the "
       "tensor f32[4, 3]"},
      {"input %a: f32[4]\n %c: f32[4] = relu [i=4] %a(i + 1) -> (i)",
       "input 0 (%a): projection (i + 1) reads [1:5], outside the tensor f32[4] (mark the operand "
       "'padded' if out-of-bounds reads are zero)"},
      {"input %a: f32[4]\n %c: f32[4] = relu [i=4] %a(i) -> (i + 1)",
       "result 0 (%c): projection (i + 1) starts writing tensor dim 0 at 1, not 0"},
      {"input %a: f32[4]\n %c: f32[5] = relu [i=4] %a(i) -> (i)",
       "result 0 (%c): projection (i) covers 4 elements of tensor dim 0 of size 5"},
      {"input %a: f32[4, 4]\n %c: f32[4] = relu [i=4, j=4] %a(i, j) -> (i)",
       "result 0 (%c): projection (i) ignores parallel dim 1, so its points write the same "
       "elements"},
      {"input %a: f32[4, 4]\n %c: f32[4] = reduce_sum [i=4, j=4:sum] %a(i, j) -> (i + j)",
       "result 0 (%c): projection (i + j) uses reduce dim 1; results must not depend on reduce "
       "dims"},
      {"input %a: f32[8]\n %c: f32[8] = relu [i=4] %a(2*i)[2] -> (2*i)[2]",
       ""},  // well formed: tiles of 2
      {"input %a: f32[8]\n %c: f32[8] = relu [i=4] %a(2*i)[2] -> (3*i)[2]",
       "result 0 (%c): projection (3*i)[2] leaves gaps in tensor dim 0"},
      {"input %a: f32[4]\n %c: f32[4] = relu [i=4] %a(i) -> (i)[2]",
       "result 0 (%c): projection (i)[2] writes elements of tensor dim 0 more than once"},
      {"input %a: f32[4, 4]\n %c: f32[4, 4] = relu [i=4] %a(i, i) -> (i, i)",
       "uses dim 0 in several tensor dims, which cannot cover the tensor exactly"},
      {"input %a: f32[4]\n %c: f32[4] = relu [i=4] %a(i, 0) -> (i)",
       "input 0 (%a): projection (i, 0) has 2 dims but the tensor f32[4] has 1"},
      {"input %a: f32[4]\n input %b: f32[4]\n %c: f32[4] = relu [i=4] %a(i), %b(i) -> (i)",
       "op 'relu' defining %c: takes 1 input(s), got 2"},
      {"input %a: f32[4]\n %c: f32[4] = einsum [i=4] %a(i) -> (i)",
       "op 'einsum' defining %c: missing required attribute 'spec'"},
      {"input %a: f32[1, 2]\n %c: f32[1] = reduce_sum [n=1] %a(n, 0)[1, 0] -> (n)",
       "input 0 (%a): projection (n, 0)[1, 0] has a window of 0 in tensor dim 1, so it touches no "
       "element; windows are at least 1"},  // fuzz_text_ir_run: the kernel read out of bounds
      {"input %a: f32[4]\n %c: f32[4] = relu [i=0] %a(i) -> (i)",
       "index dim 'i' has extent 0; extents must be positive"},
      {"input %a: f32[4]\n input %b: i32[4]\n %c: f32[4] = add [i=4] %a(i), %b(i) -> (i)",
       "operands and results must share one element type, got f32, i32"},
      {"input %a: f32[4]\n input %b: f32[4]\n input %m: f32[4]\n"
       " %c: f32[4] = where [i=4] %m(i), %a(i), %b(i) -> (i)",
       "condition (input 0) must be bool, got f32"},
      {"input %ids: f32[2]\n param %t: f32[10, 3]\n"
       " %e: f32[2, 3] = embedding [s=2, h=3, v=10:sum] %ids(s), %t(v, h) -> (s, h)",
       "ids (input 0) must be i32 or i64, got f32"},
      {"input %a: f32[16, 16]\n"
       " %c: f32[8, 8] = maxpool2d{kernel=[3, 3]} [h=8, w=8] %a(2*h - 1, 2*w - 1)[3, 3] -> (h, w)",
       "input 0 (%a): projection (2*h - 1, 2*w - 1)[3, 3] reads [-1:16, -1:16], outside the "
       "tensor f32[16, 16]"},
      {"input %a: f32[16, 16]\n"
       " %c: f32[8, 8] = maxpool2d{kernel=[3, 3], padding=[1, 1], stride=[2, 2]} [h=8, w=8] %a(2*h "
       "- 1, 2*w - 1)[3, 3] padded -> "
       "(h, w)",
       ""},  // the same with zero padding is fine
      {"input %a: f32[4]\n %c: f32[4] = relu [i=4] %a(i + 100) padded -> (i)",
       "padded projection (i + 100) never touches the tensor"},
      {"input %a: f32[4]\n %c: f32[1099511627776] = relu [i=1099511627776] %a(1099511627776*i) -> "
       "(i)",
       "projection coefficients are too large"},
  };
  for (const auto& c : cases) {
    auto diags = verify_text(c.body);
    if (std::string(c.message).empty()) {
      EXPECT_TRUE(diags.empty()) << c.body << "\n" << diags.front().to_string();
      continue;
    }
    ASSERT_EQ(diags.size(), 1u) << c.body << "\n"
                                << (diags.empty() ? "no diagnostic" : diags[1].to_string());
    EXPECT_NE(diags[0].message.find(c.message), std::string::npos)
        << "expected: " << c.message << "\n     got: " << diags[0].to_string();
    EXPECT_EQ(diags[0].loc.file, "v.hd");
    EXPECT_GT(diags[0].loc.line, 1);
  }
}

// Issue #23: attributes and projections are one source of truth. Each case is one op whose
// attribute disagrees with its projection (or a window the kernel would overrun), and the
// diagnostic names both; the "" cases are the agreeing forms, with and without the optional
// attributes.
TEST(Verifier, AttributesAgreeWithProjections) {
  const std::string conv_in = "input %x: f32[1, 2, 8, 8]\n param %k: f32[4, 2, 3, 3]\n ";
  const std::string row_in = "input %x: f32[4, 10]\n ";
  struct FormCase {
    std::string body;
    const char* message;
  };
  const FormCase cases[] = {
      // The dilated conv that crashed the kernel: a 3x3 kernel at dilation 2 spans 5x5.
      {"input %x: f32[1, 1, 8, 8]\n param %k: f32[1, 1, 3, 3]\n"
       " %y: f32[1, 1, 6, 6] = conv2d{dilation=[2, 2]} [n=1, co=1, oh=6, ow=6, ci=1:sum] "
       "%x(n, ci, oh, ow)[1, 1, 3, 3], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)",
       "input 0 (%x): window [3, 3] of (n, ci, oh, ow)[1, 1, 3, 3] is not the dilated kernel [5, "
       "5]: the 3x3 kernel of input 1 (%k) with dilation=[2, 2] spans [5, 5]"},
      // fuzz_text_ir_run: a padded x read past its batch computed another value than the walker.
      {"input %x: f32[1, 1, 8, 8]\n param %k: f32[1, 1, 1, 1]\n"
       " %y: f32[2, 1, 8, 8] = conv2d [n=2, co=1, oh=8, ow=8, ci=1:sum] "
       "%x(n, ci, oh, ow) padded, %k(co, ci, 0, 0) -> (n, co, oh, ow)",
       "conv2d batch disagrees: x f32[1, 1, 8, 8] and the result f32[2, 1, 8, 8] must have the "
       "same N (a padded x pads H and W only)"},
      {"input %x: f32[1, 1, 8, 8]\n param %k: f32[1, 1, 3, 3]\n"
       " %y: f32[1, 1, 4, 4] = conv2d{dilation=[2, 2]} [n=1, co=1, oh=4, ow=4, ci=1:sum] "
       "%x(n, ci, oh, ow)[1, 1, 5, 5], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)",
       ""},
      // No optional attribute: stride 1, padding 0, dilation 1, groups 1.
      {conv_in + "%y: f32[1, 4, 6, 6] = conv2d [n=1, co=4, oh=6, ow=6, ci=2:sum] %x(n, ci, oh, "
                 "ow)[1, 1, 3, 3], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)",
       ""},
      {conv_in + "%y: f32[1, 4, 3, 3] = conv2d [n=1, co=4, oh=3, ow=3, ci=2:sum] %x(n, ci, 2*oh, "
                 "2*ow)[1, 1, 3, 3], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)",
       "attribute stride=[1, 1] (the default) disagrees with the projection (n, ci, 2*oh, "
       "2*ow)[1, 1, 3, 3] of input 0 (%x), which steps oh and ow by [2, 2]"},
      {conv_in + "%y: f32[1, 4, 8, 8] = conv2d{padding=[1, 1]} [n=1, co=4, oh=8, ow=8, ci=2:sum] "
                 "%x(n, ci, oh - 2, ow - 2)[1, 1, 3, 3] padded, %k(co, ci, 0, 0)[1, 1, 3, 3] -> "
                 "(n, co, oh, ow)",
       "attribute padding=[1, 1, 1, 1] disagrees with the projection (n, ci, oh - 2, ow - 2)[1, 1, "
       "3, 3] of input 0 (%x), which pads [2, 2] at the top and left"},
      {conv_in + "%y: f32[1, 4, 8, 8] = conv2d{padding=[1, 1, 0, 1]} [n=1, co=4, oh=8, ow=8, "
                 "ci=2:sum] %x(n, ci, oh - 1, ow - 1)[1, 1, 3, 3] padded, %k(co, ci, 0, 0)[1, 1, "
                 "3, 3] -> (n, co, oh, ow)",
       "reads 1 beyond the bottom edge of f32[1, 2, 8, 8] but attribute padding=[1, 1, 0, 1] "
       "allows 0"},
      {conv_in + "%y: f32[1, 4, 6, 6] = conv2d{groups=2} [n=1, co=4, oh=6, ow=6, ci=2:sum] %x(n, "
                 "ci, oh, ow)[1, 1, 3, 3], %k(co, ci, 0, 0)[1, 1, 3, 3] -> (n, co, oh, ow)",
       "attribute groups=2 disagrees with the projections, which have 1 group(s)"},
      {conv_in + "%y: f32[1, 4, 6, 6] = conv2d [n=1, co=4, oh=6, ow=6, ci=2:sum] %x(n, ci, oh, "
                 "ow)[1, 1, 3, 3], %k(co, ci, 0, 0)[1, 1, 2, 2] -> (n, co, oh, ow)",
       "input 1 (%k): projection (co, ci, 0, 0)[1, 1, 2, 2] is not the conv2d weight form (co, ci, "
       "0, 0)[1, 1, 3, 3]"},
      // einsum: the spec against the projections.
      {"input %x: f32[4, 8]\n param %w: f32[8, 5]\n %y: f32[4, 5] = einsum{spec=\"ab,cd->ef\"} "
       "[m=4, n=5, k=8:sum] %x(m, k), %w(k, n) -> (m, n)",
       "attribute spec=\"ab,cd->ef\" disagrees with the projections: index dim 'k' is letter 'b' "
       "in input 0 (%x) but 'c' in input 1 (%w) (k, n)"},
      {"input %x: f32[4, 8]\n param %w: f32[8, 5]\n %y: f32[4, 5] = einsum{spec=\"mk,kn->nm\"} "
       "[m=4, n=5, k=8:sum] %x(m, k), %w(k, n) -> (m, n)",
       "attribute spec=\"mk,kn->nm\" disagrees with the projections: letter 'n' is index dim 'n' "
       "in input 1 (%w) but 'm' in result 0 (%y) (m, n)"},
      {"input %x: f32[4, 8]\n param %w: f32[8, 5]\n %y: f32[4, 5] = einsum{spec=\"mk,kn->mn\"} "
       "[m=4, n=5, k=8:max] %x(m, k), %w(k, n) -> (m, n)",
       "sums letter 'k' (absent from the output) but index dim 'k' reduces with another monoid"},
      {"input %x: f32[4, 8]\n param %w: f32[8, 5]\n %y: f32[4, 5] = einsum{spec=\"mk,kn->mn\"} "
       "[m=4, n=5, k=8:sum] %x(m, k), %w(k, n) -> (m, n)",
       ""},
      {"input %x: f32[4, 8]\n param %w: f32[4, 5]\n %y: f32[4, 5] = einsum{spec=\"mk,kn->mn\"} "
       "[m=4, n=5, k=4:sum] %x(m, 2*k), %w(k, n) -> (m, n)",
       "input 0 (%x): projection (m, 2*k) is not a plain selection of index dims"},
      // Pooling: kernel, stride (default: the kernel) and padding against the window.
      {"input %x: f32[1, 1, 8, 8]\n %y: f32[1, 1, 4, 4] = maxpool2d{kernel=[3, 3], stride=[2, 2]} "
       "[n=1, c=1, h=4, w=4] %x(n, c, 2*h, 2*w)[1, 1, 2, 2] -> (n, c, h, w)",
       "attribute kernel=[3, 3] disagrees with the window [2, 2] of input 0 (%x)"},
      {"input %x: f32[1, 1, 8, 8]\n %y: f32[1, 1, 7, 7] = maxpool2d{kernel=[2, 2]} [n=1, c=1, "
       "h=7, w=7] %x(n, c, h, w)[1, 1, 2, 2] -> (n, c, h, w)",
       "attribute stride=[2, 2] (the default: the kernel) disagrees with the projection (n, c, h, "
       "w)[1, 1, 2, 2] of input 0 (%x), which steps by [1, 1]"},
      {"input %x: f32[1, 1, 8, 8]\n %y: f32[1, 1, 4, 4] = maxpool2d{kernel=[2, 2]} [n=1, c=1, "
       "h=4, w=4] %x(n, c, 2*h, 2*w)[1, 1, 2, 2] -> (n, c, h, w)",
       ""},
      // softmax: the axis against the window; norms: windows of one size.
      {row_in + "%y: f32[4, 10] = softmax{axis=0} [m=4] %x(m, 0)[1, 10] -> (m, 0)[1, 10]",
       "attribute axis=0 disagrees with the projection (m, 0)[1, 10] of input 0 (%x): the window "
       "must span all of tensor dim 0"},
      {row_in + "%y: f32[4, 10] = softmax [m=4] %x(m, 0)[1, 10] -> (m, 0)[1, 10]", ""},
      {row_in + "%y: f32[4, 10] = softmax [m=4, n=2] %x(m, 5*n)[1, 5] -> (m, 5*n)[1, 5]",
       "attribute axis=-1 (the default: the last dim) disagrees with the projection (m, 5*n)[1, "
       "5]"},
      {row_in + "param %g: f32[5]\n %y: f32[4, 10] = layernorm [m=4] %x(m, 0)[1, 10], %g(0)[5] -> "
                "(m, 0)[1, 10]",
       "input 1 (%g): window of (0)[5] holds 5 elements but the normalized window of input 0 (%x) "
       "(m, 0)[1, 10] holds 10"},
  };
  for (const auto& c : cases) {
    auto diags = verify_text(c.body);
    if (std::string(c.message).empty()) {
      EXPECT_TRUE(diags.empty()) << c.body << "\n" << diags.front().to_string();
      continue;
    }
    ASSERT_EQ(diags.size(), 1u) << c.body;
    EXPECT_NE(diags[0].message.find(c.message), std::string::npos)
        << "expected: " << c.message << "\n     got: " << diags[0].to_string();
  }
}

TEST(Verifier, ReportsEveryViolationNotJustTheFirst) {
  auto diags = verify_text(
      "input %a: f32[4]\n"
      " %b: f32[4] = relu [i=4] %a(i + 1) -> (i)\n"
      " %c: f32[5] = relu [i=4] %b(i) -> (i)\n"
      " %d: f32[4] = relu [i=4] %c(i) -> (i + 2)");
  ASSERT_EQ(diags.size(), 3u);
  EXPECT_EQ(diags[0].loc.line, 3);
  EXPECT_EQ(diags[1].loc.line, 4);
  EXPECT_EQ(diags[2].loc.line, 5);
  EXPECT_EQ(diags[0].to_string().rfind("v.hd:3:", 0), 0u);
}

TEST(Verifier, BuiltGraphsWithDuplicateNamesAreCaught) {
  GraphBuilder b;
  ValueId x = b.input("x", f32({4}));
  b.op(OpKind::kRelu, "[i=4]", {{x, "(i)"}}, f32({4}), "(i)", {}, "x");
  auto diags = verify(b.graph());
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].message, "value %x is defined twice");
}

TEST(Verifier, HugeShapesAreReportedNotOverflowed) {
  auto diags = verify_text("input %a: f32[1099511627776, 1099511627776, 1099511627776]");
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("has too many elements"), std::string::npos);
}

TEST(Verifier, RandomGraphsAreWellFormed) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Graph g = testing::random_graph(40, seed);
    auto diags = verify(g);
    EXPECT_TRUE(diags.empty()) << "seed " << seed << ": " << diags.front().to_string();
  }
}

TEST(GraphStats, CountsFromIndexSpaces) {
  auto g = parse_graph(
      "graph g {\n input %x: f32[8, 16]\n param %w: f32[16, 4]\n param %b: f32[4]\n"
      " %h: f32[8, 4] = einsum{spec=\"mk,kn->mn\"} [m=8, n=4, k=16:sum] %x(m, k), %w(k, n) -> (m, "
      "n)\n"
      " %y: f32[8, 4] = add [m=8, n=4] %h(m, n), %b(n) -> (m, n)\n"
      " %t: f32[4, 8] = transpose{perm=[1, 0]} [i=4, j=8] %y(j, i) -> (i, j)\n output %t\n}");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  GraphStats s = graph_stats(*g);
  EXPECT_EQ(s.ops, 3);
  EXPECT_EQ(s.tensors, 6);
  EXPECT_EQ(s.parameters, 16 * 4 + 4);
  EXPECT_EQ(s.parameter_bytes, (16 * 4 + 4) * 4);
  EXPECT_EQ(s.flops, 2.0 * 8 * 4 * 16 + 8 * 4);  // multiply-add per point, one add per element
}

}  // namespace
}  // namespace heddle
