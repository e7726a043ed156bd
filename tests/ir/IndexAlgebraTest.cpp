// Index algebra: boxes, affine maps and projections, checked against brute force over every point
// of thousands of random small boxes and maps.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "heddle/ir/IndexProjection.h"
#include "heddle/ir/Verifier.h"

namespace heddle {
namespace {

// Every point of a box, in lexicographic order.
std::vector<IVec> points(const Box& b) {
  std::vector<IVec> out;
  if (b.empty()) return out;
  std::vector<int64_t> p(b.start().values());
  while (true) {
    out.emplace_back(p);
    int64_t d = b.rank() - 1;
    while (d >= 0) {
      if (++p[d] < b.end()[d]) break;
      p[d] = b.start()[d];
      --d;
    }
    if (d < 0) return out;
  }
}

struct Gen {
  std::mt19937_64 rng{12345};
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  Box box(int64_t rank, bool allow_empty) {
    std::vector<int64_t> s, e;
    for (int64_t i = 0; i < rank; ++i) {
      s.push_back(uniform(-3, 3));
      e.push_back(s.back() + uniform(allow_empty ? 0 : 1, 4));
    }
    return Box(IVec(s), IVec(e));
  }
  AffineMap map(int64_t in, int64_t out, int64_t coef) {
    std::vector<int64_t> a, b;
    for (int64_t i = 0; i < in * out; ++i) a.push_back(uniform(-coef, coef));
    for (int64_t i = 0; i < out; ++i) b.push_back(uniform(-5, 5));
    return AffineMap(in, a, IVec(b));
  }
};

TEST(Box, BasicsAndEmpty) {
  Box b({0, 2}, {4, 8});
  EXPECT_EQ(b.volume(), 24);
  EXPECT_EQ(b.to_string(), "[0:4, 2:8]");
  EXPECT_TRUE(b.contains(IVec{3, 7}));
  EXPECT_FALSE(b.contains(IVec{4, 7}));
  Box e({1, 1}, {1, 5});
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.volume(), 0);
  EXPECT_TRUE(b.contains(e));
  Box scalar(IVec{}, IVec{});
  EXPECT_EQ(scalar.volume(), 1);
  EXPECT_FALSE(scalar.empty());
  EXPECT_TRUE(b.intersect(Box({5, 0}, {6, 1})).empty());
  EXPECT_EQ(b.intersect(Box({2, 0}, {6, 3})), Box({2, 2}, {4, 3}));
}

TEST(Box, SplitUsesCeilingDivisionAndNeverGoesNegative) {
  Gen g;
  for (int trial = 0; trial < 2000; ++trial) {
    Box b = g.box(g.uniform(1, 3), true);
    int64_t dim = g.uniform(0, b.rank() - 1);
    int64_t n = g.uniform(1, 7);
    auto parts = b.split(dim, n);
    ASSERT_EQ(static_cast<int64_t>(parts.size()), n);
    int64_t extent = b.shape()[dim];
    int64_t chunk = (extent + n - 1) / n;
    int64_t total = 0, cursor = b.start()[dim];
    for (int64_t k = 0; k < n; ++k) {
      const Box& p = parts[k];
      EXPECT_GE(p.shape()[dim], 0);
      EXPECT_LE(p.shape()[dim], chunk);
      EXPECT_EQ(p.start()[dim], std::min(cursor, b.end()[dim]));  // consecutive
      cursor = p.end()[dim];
      total += p.volume();
      EXPECT_TRUE(b.contains(p));
      EXPECT_EQ(p, b.split_part(dim, n, k));
    }
    EXPECT_EQ(cursor, b.end()[dim]);
    EXPECT_EQ(total, b.volume());
  }
}

TEST(AffineMap, ImageIsExactBoundingBoxForAnySigns) {
  Gen g;
  for (int trial = 0; trial < 5000; ++trial) {
    int64_t in = g.uniform(0, 3), out = g.uniform(0, 3);
    AffineMap m = g.map(in, out, 3);
    Box b = g.box(in, true);
    Box img = m.image(b);
    auto pts = points(b);
    if (pts.empty()) {
      EXPECT_TRUE(img.empty() || out == 0) << m.to_string() << " " << b.to_string();
      continue;
    }
    std::vector<int64_t> lo(out, INT64_MAX), hi(out, INT64_MIN);
    for (const auto& p : pts) {
      IVec q = m.apply(p);
      ASSERT_TRUE(img.contains(q)) << m.to_string() << " " << b.to_string();
      for (int64_t j = 0; j < out; ++j) {
        lo[j] = std::min(lo[j], q[j]);
        hi[j] = std::max(hi[j], q[j] + 1);
      }
    }
    EXPECT_EQ(img, Box(IVec(lo), IVec(hi))) << m.to_string() << " on " << b.to_string();
  }
}

TEST(AffineMap, CompositionAgreesWithApplyingTwice) {
  Gen g;
  for (int trial = 0; trial < 2000; ++trial) {
    int64_t a = g.uniform(0, 3), b = g.uniform(0, 3), c = g.uniform(0, 3);
    AffineMap inner = g.map(a, b, 4), outer = g.map(b, c, 4);
    AffineMap both = outer.compose(inner);
    for (const auto& p : points(g.box(a, false)))
      EXPECT_EQ(both.apply(p), outer.apply(inner.apply(p)));
  }
  AffineMap id = AffineMap::identity(3);
  AffineMap m = g.map(3, 2, 3);
  EXPECT_EQ(m.compose(id), m);
}

TEST(AffineMap, PrintsNamedRows) {
  AffineMap m = AffineMap::from_rows(2, {{2, 0}, {0, -1}, {0, 0}, {64, 1}}, IVec{-1, 0, 3, 0});
  EXPECT_EQ(m.to_string(), "(d0, d1) -> (2*d0 - 1, -d1, 3, 64*d0 + d1)");
  EXPECT_EQ(m.row_string(0, {"oh", "ow"}), "2*oh - 1");
}

TEST(IndexProjection, ImageIsUnionOfWindowsExactly) {
  Gen g;
  for (int trial = 0; trial < 5000; ++trial) {
    int64_t in = g.uniform(0, 3), out = g.uniform(0, 3);
    std::vector<int64_t> w;
    for (int64_t j = 0; j < out; ++j) w.push_back(g.uniform(1, 3));
    IndexProjection proj(g.map(in, out, 3), IVec(w));
    Box b = g.box(in, true);
    Box img = proj.image(b);
    auto pts = points(b);
    if (pts.empty()) continue;
    std::vector<int64_t> lo(out, INT64_MAX), hi(out, INT64_MIN);
    for (const auto& p : pts) {
      Box win = proj.window_at(p);
      ASSERT_TRUE(img.contains(win));
      for (int64_t j = 0; j < out; ++j) {
        lo[j] = std::min(lo[j], win.start()[j]);
        hi[j] = std::max(hi[j], win.end()[j]);
      }
    }
    EXPECT_EQ(img, Box(IVec(lo), IVec(hi))) << proj.to_string() << " on " << b.to_string();
  }
}

TEST(IndexProjection, MarginalOverlapMatchesNeighbourWindows) {
  Gen g;
  for (int trial = 0; trial < 3000; ++trial) {
    int64_t in = g.uniform(1, 3), out = g.uniform(1, 3);
    std::vector<int64_t> w;
    for (int64_t j = 0; j < out; ++j) w.push_back(g.uniform(1, 4));
    IndexProjection proj(g.map(in, out, 3), IVec(w));
    IVec p(std::vector<int64_t>(static_cast<size_t>(in), 0));
    int64_t i = g.uniform(0, in - 1);
    Box a = proj.window_at(p), b = proj.window_at(p.with(i, 1));
    IVec overlap = proj.marginal_overlap(i);
    for (int64_t j = 0; j < out; ++j) {
      int64_t lo = std::max(a.start()[j], b.start()[j]);
      int64_t hi = std::min(a.end()[j], b.end()[j]);
      EXPECT_EQ(overlap[j], std::max<int64_t>(hi - lo, 0)) << proj.to_string() << " dim " << i;
    }
  }
  // A 3x3 stride-2 convolution window: neighbouring output rows share one input row.
  IndexProjection conv(AffineMap::from_rows(1, {{2}}, IVec{-1}), IVec{3});
  EXPECT_EQ(conv.marginal_overlap(0), IVec{1});
}

TEST(IndexProjection, ComposeReindexes) {
  Gen g;
  for (int trial = 0; trial < 1000; ++trial) {
    IndexProjection proj(g.map(2, 2, 3), IVec{2, 1});
    AffineMap inner = g.map(3, 2, 2);
    IndexProjection c = proj.compose(inner);
    for (const auto& p : points(g.box(3, false)))
      EXPECT_EQ(c.window_at(p), proj.window_at(inner.apply(p)));
  }
}

TEST(ExactCover, AgreesWithBruteForce) {
  Gen g;
  int covering = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    int64_t in = g.uniform(1, 3), out = g.uniform(1, 2);
    std::vector<int64_t> ext, w;
    std::vector<bool> reduce;
    for (int64_t i = 0; i < in; ++i) {
      ext.push_back(g.uniform(1, 3));
      reduce.push_back(g.uniform(0, 4) == 0);
    }
    for (int64_t j = 0; j < out; ++j) w.push_back(g.uniform(1, 2));
    // Sparse small coefficients so exact covers actually occur.
    std::vector<int64_t> a;
    for (int64_t k = 0; k < in * out; ++k) a.push_back(g.uniform(0, 2) ? 0 : g.uniform(-3, 3));
    AffineMap m0(in, a, IVec::zeros(out));
    IndexProjection p0(m0, IVec(w));
    // Shift so the image starts at 0, and size the tensor to the image (or slightly off).
    Box img = p0.image(Box::of_shape(IVec(ext)));
    IVec shift = IVec::zeros(out) - img.start();
    IVec shape = img.shape();
    if (g.uniform(0, 5) == 0) shape = shape.with(0, shape[0] + 1);
    IndexProjection proj(AffineMap(in, a, shift), IVec(w));
    // Brute force: count writes per element over the parallel dims (reduce dims pinned to 0
    // when their columns are zero, otherwise the projection is invalid by rule).
    bool reduce_used = false;
    for (int64_t i = 0; i < in; ++i)
      for (int64_t j = 0; j < out; ++j)
        if (reduce[i] && a[j * in + i] != 0) reduce_used = true;
    std::vector<int64_t> par_ext(ext);
    for (int64_t i = 0; i < in; ++i)
      if (reduce[i]) par_ext[i] = 1;
    std::vector<int> count(static_cast<size_t>(shape.product()), 0);
    bool outside = false;
    for (const auto& p : points(Box::of_shape(IVec(par_ext))))
      for (const auto& e : points(proj.window_at(p))) {
        if (!Box::of_shape(shape).contains(e)) {
          outside = true;
          continue;
        }
        int64_t flat = 0;
        for (int64_t j = 0; j < out; ++j) flat = flat * shape[j] + e[j];
        ++count[flat];
      }
    bool brute = !reduce_used && !outside &&
                 std::all_of(count.begin(), count.end(), [](int c) { return c == 1; });
    Status s = check_exact_cover(proj, IVec(ext), reduce, shape);
    EXPECT_EQ(s.ok(), brute) << proj.to_string() << " extents " << IVec(ext).to_string()
                             << " shape " << shape.to_string()
                             << (s.ok() ? "" : " rule: " + s.error().message);
    covering += brute;
  }
  EXPECT_GT(covering, 300);  // the generator must exercise both outcomes
}

TEST(ValueTypes, EqualityAndHashing) {
  IndexProjection a(AffineMap::identity(2), IVec{1, 3});
  IndexProjection b(AffineMap::identity(2), IVec{1, 3});
  IndexProjection c(AffineMap::identity(2), IVec{1, 2});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a, c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(std::hash<IVec>{}(IVec{1, 2}), std::hash<IVec>{}(IVec{1, 2}));
  EXPECT_NE(Box({0}, {2}), Box({0}, {3}));
}

}  // namespace
}  // namespace heddle
