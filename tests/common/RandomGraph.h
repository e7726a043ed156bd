// A generator of random well-formed graphs for property tests and benchmarks: chains and DAGs of
// contractions, elementwise ops with broadcasting, transposes, row-windowed softmax, reductions,
// padded convolutions and reshapes, over small random shapes.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "heddle/ir/GraphBuilder.h"

namespace heddle::testing {

/// Builds a random graph of `num_ops` ops with seed `seed`; the result always passes verify().
/// `scale` multiplies every drawn dim (default 1; larger for meshes of hundreds of devices).
inline Graph random_graph(int64_t num_ops, uint64_t seed, bool odd_names = false,
                          int64_t scale = 1) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t dims[] = {2, 3, 4, 6, 8};
  auto dim = [&] { return dims[pick(0, 4)] * scale; };
  GraphBuilder b("random_" + std::to_string(seed));
  struct V {
    ValueId id;
    int64_t m, n;
  };
  std::vector<V> pool;
  auto name = [&](const char* base) {
    std::string n = std::string(base) + std::to_string(b.graph().num_values());
    if (odd_names && pick(0, 3) == 0) n = "layer/" + n + ":0";
    return n;
  };
  auto sp = [](int64_t m, int64_t n) {
    return "[i=" + std::to_string(m) + ", j=" + std::to_string(n) + "]";
  };
  for (int k = 0; k < 2; ++k) {
    int64_t m = dim(), n = dim();
    pool.push_back({b.input(name("x"), f32({m, n})), m, n});
  }
  auto any = [&]() -> V& {
    // Prefer recent values so graphs are deep, sometimes reach back for DAG shapes.
    int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(pool.size()) - 4);
    return pool[pick(pick(0, 3) == 0 ? 0 : lo, static_cast<int64_t>(pool.size()) - 1)];
  };
  for (int64_t k = 0; k < num_ops; ++k) {
    V a = any();
    std::string s = sp(a.m, a.n);
    switch (pick(0, 8)) {
      case 0: {  // matmul with a fresh weight
        int64_t n2 = dim();
        ValueId w = b.param(name("w"), f32({a.n, n2}));
        std::string space = "[m=" + std::to_string(a.m) + ", n=" + std::to_string(n2) +
                            ", k=" + std::to_string(a.n) + ":sum]";
        pool.push_back(
            {b.op(OpKind::kEinsum, space, {{a.id, "(m, k)"}, {w, "(k, n)"}}, f32({a.m, n2}),
                  "(m, n)", {{"spec", std::string("mk,kn->mn")}}, name("mm")),
             a.m, n2});
        break;
      }
      case 1: {
        OpKind kinds[] = {OpKind::kRelu, OpKind::kExp, OpKind::kTanh, OpKind::kNeg};
        pool.push_back({b.op(kinds[pick(0, 3)], s, {{a.id, "(i, j)"}}, f32({a.m, a.n}), "(i, j)",
                             {}, name("u")),
                        a.m, a.n});
        break;
      }
      case 2: {  // binary with a same-shaped value if there is one, else a broadcast bias
        ValueId other = -1;
        for (size_t back = 1; back <= 16 && back <= pool.size(); ++back) {
          const V& c = pool[pool.size() - back];
          if (c.m == a.m && c.n == a.n && c.id != a.id) other = c.id;
        }
        if (other < 0) {
          other = b.param(name("bias"), f32({a.n}));
          pool.push_back({b.op(OpKind::kAdd, s, {{a.id, "(i, j)"}, {other, "(j)"}}, f32({a.m, a.n}),
                               "(i, j)", {}, name("add")),
                          a.m, a.n});
        } else {
          pool.push_back({b.op(OpKind::kMul, s, {{a.id, "(i, j)"}, {other, "(i, j)"}},
                               f32({a.m, a.n}), "(i, j)", {}, name("mul")),
                          a.m, a.n});
        }
        break;
      }
      case 3:
        pool.push_back({b.op(OpKind::kTranspose, sp(a.n, a.m), {{a.id, "(j, i)"}}, f32({a.n, a.m}),
                             "(i, j)", {{"perm", std::vector<int64_t>{1, 0}}}, name("tr")),
                        a.n, a.m});
        break;
      case 4: {
        std::string w = "(i, 0)[1, " + std::to_string(a.n) + "]";
        pool.push_back({b.op(OpKind::kSoftmax, "[i=" + std::to_string(a.m) + "]", {{a.id, w}},
                             f32({a.m, a.n}), w, {{"axis", int64_t{1}}}, name("sm")),
                        a.m, a.n});
        break;
      }
      case 5: {  // row sum, then broadcast it back
        ValueId r = b.op(OpKind::kReduceSum,
                         "[i=" + std::to_string(a.m) + ", j=" + std::to_string(a.n) + ":sum]",
                         {{a.id, "(i, j)"}}, f32({a.m}), "(i)", {}, name("rs"));
        pool.push_back({b.op(OpKind::kSub, s, {{a.id, "(i, j)"}, {r, "(i)"}}, f32({a.m, a.n}),
                             "(i, j)", {}, name("centered")),
                        a.m, a.n});
        break;
      }
      case 6: {  // "same" average pooling along columns with a padded 3-wide window
        pool.push_back({b.op(OpKind::kAvgPool2d, s + "", {{a.id, "(i, j - 1)[1, 3]", true}},
                             f32({a.m, a.n}), "(i, j)",
                             {{"kernel", std::vector<int64_t>{1, 3}},
                              {"stride", std::vector<int64_t>{1, 1}},
                              {"padding", std::vector<int64_t>{0, 1, 0, 1}}},
                             name("avg")),
                        a.m, a.n});
        break;
      }
      case 7: {  // merge both dims into one, then split them back (affine reshapes)
        std::string mn = std::to_string(a.m * a.n);
        ValueId flat = b.op(OpKind::kReshape, s, {{a.id, "(i, j)"}}, f32({a.m * a.n}),
                            "(" + std::to_string(a.n) + "*i + j)", {}, name("flat"));
        pool.push_back({b.op(OpKind::kReshape, s, {{flat, "(" + std::to_string(a.n) + "*i + j)"}},
                             f32({a.m, a.n}), "(i, j)", {}, name("unflat")),
                        a.m, a.n});
        ++k;
        break;
      }
      default: {  // a column-window max pool with stride 1 (valid, shrinks n by 1)
        if (a.n < 2) {
          pool.push_back(
              {b.op(OpKind::kRelu, s, {{a.id, "(i, j)"}}, f32({a.m, a.n}), "(i, j)", {}, name("u")),
               a.m, a.n});
          break;
        }
        pool.push_back(
            {b.op(OpKind::kMaxPool2d, sp(a.m, a.n - 1), {{a.id, "(i, j)[1, 2]"}},
                  f32({a.m, a.n - 1}), "(i, j)",
                  {{"kernel", std::vector<int64_t>{1, 2}}, {"stride", std::vector<int64_t>{1, 1}}},
                  name("pool")),
             a.m, a.n - 1});
        break;
      }
    }
  }
  b.output(pool.back().id);
  return std::move(b).finish();
}

}  // namespace heddle::testing
