// Every op kind's kernel: the whole index box against a naive per-element evaluator written here
// from the op's math (not from its projections), and against random sub-box partitions (reduce
// dims split too), both merged from separate tiles and accumulated in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "OpsTestUtil.h"
#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/Ops.h"

namespace heddle {
namespace {

using testing::for_all;

using Naive = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  std::string name;
  Graph g;
  std::vector<Tensor> inputs;
  Naive naive;
  int64_t label_hi = 2;
};

// Input coordinate of a broadcast operand of `shape` at output point p.
IVec bcast(const IVec& shape, const IVec& p) {
  std::vector<int64_t> c;
  int64_t off = p.size() - shape.size();
  for (int64_t i = 0; i < shape.size(); ++i) c.push_back(shape[i] == 1 ? 0 : p[off + i]);
  return IVec(c);
}

double gelu_ref(double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double unary_ref(OpKind k, double x) {
  switch (k) {
    case OpKind::kRelu:
      return std::max(x, 0.0);
    case OpKind::kGelu:
      return gelu_ref(x);
    case OpKind::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * std::pow(x, 3))));
    case OpKind::kSilu:
      return x / (1 + std::exp(-x));
    case OpKind::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case OpKind::kTanh:
      return std::tanh(x);
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kRsqrt:
      return std::pow(x, -0.5);
    case OpKind::kNeg:
      return -x;
    case OpKind::kAbs:
      return x < 0 ? -x : x;
    case OpKind::kSquare:
      return x * x;
    case OpKind::kReciprocal:
      return 1 / x;
    case OpKind::kScale:
      return 0.75 * x;
    default:
      return x;
  }
}

double binary_ref(OpKind k, double a, double b) {
  switch (k) {
    case OpKind::kAdd:
      return a + b;
    case OpKind::kSub:
      return a - b;
    case OpKind::kMul:
      return a * b;
    case OpKind::kDiv:
      return a / b;
    case OpKind::kMaximum:
      return a > b ? a : b;
    case OpKind::kMinimum:
      return a < b ? a : b;
    default:
      return std::exp(b * std::log(a));  // pow, a > 0
  }
}

// Naive einsum from the spec letters.
Tensor einsum_ref(const std::string& spec, const std::vector<Tensor>& in, const IVec& oshape) {
  auto arrow = spec.find("->");
  std::string lhs = spec.substr(0, arrow), out = spec.substr(arrow + 2);
  std::vector<std::string> terms;
  size_t c = lhs.find(',');
  terms.push_back(lhs.substr(0, c));
  if (c != std::string::npos) terms.push_back(lhs.substr(c + 1));
  std::map<char, int64_t> ext;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t j = 0; j < terms[i].size(); ++j) ext[terms[i][j]] = in[i].shape()[j];
  std::string letters;
  std::vector<int64_t> ls;
  for (auto [ch, e] : ext) {
    letters += ch;
    ls.push_back(e);
  }
  Tensor r(DType::kF32, oshape);
  std::vector<double> acc(static_cast<size_t>(r.numel()), 0.0);
  for_all(IVec(ls), [&](const IVec& p) {
    auto at = [&](const std::string& t) {
      std::vector<int64_t> v;
      for (char ch : t) v.push_back(p[static_cast<int64_t>(letters.find(ch))]);
      return IVec(v);
    };
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i) prod *= in[i].at(at(terms[i]));
    IVec o = at(out);
    int64_t lin = 0;
    for (int64_t d = 0; d < o.size(); ++d) lin = lin * oshape[d] + o[d];
    acc[lin] += prod;
  });
  for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = static_cast<float>(acc[i]);
  return r;
}

std::vector<Case> make_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  auto dim = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto add = [&](std::string name, Graph g, Naive naive, double lo = -1, double hi = 1,
                 int64_t int_hi = 2) {
    Case c{std::move(name), std::move(g), {}, std::move(naive), int_hi};
    for (ValueId v : c.g.inputs())
      c.inputs.push_back(testing::random_tensor(c.g.type(v), rng, lo, hi, int_hi));
    cases.push_back(std::move(c));
  };
  // --- einsum ---
  for (std::string spec : {"mk,kn->mn", "km,kn->mn", "mk,nk->nm", "bmk,bkn->bmn", "bhqd,bhkd->bhqk",
                           "bsh,hd->bsd", "ab,b->a", "i,j->ij", "ij->ji", "ijk->ik"}) {
    Graph g;
    Ops ops(g);
    std::map<char, int64_t> ext;
    auto arrow = spec.find("->");
    std::string lhs = spec.substr(0, arrow);
    std::vector<ValueId> vs;
    size_t start = 0;
    while (true) {
      size_t c = lhs.find(',', start);
      std::string t = lhs.substr(start, c == std::string::npos ? c : c - start);
      std::vector<int64_t> s;
      for (char ch : t) {
        if (!ext.count(ch)) ext[ch] = dim(1, 6);
        s.push_back(ext[ch]);
      }
      vs.push_back(ops.input("x" + std::to_string(vs.size()), f32(s)));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    ValueId y = ops.einsum(spec, vs[0], vs.size() > 1 ? vs[1] : kNoValue);
    ops.output(y);
    IVec os = g.type(y).shape();
    add("einsum " + spec, std::move(g),
        [spec, os](const std::vector<Tensor>& in) { return einsum_ref(spec, in, os); });
  }
  // --- unary ---
  for (OpKind k : {OpKind::kRelu, OpKind::kGelu, OpKind::kGeluTanh, OpKind::kSilu, OpKind::kSigmoid,
                   OpKind::kTanh, OpKind::kExp, OpKind::kLog, OpKind::kSqrt, OpKind::kRsqrt,
                   OpKind::kNeg, OpKind::kAbs, OpKind::kSquare, OpKind::kReciprocal, OpKind::kScale,
                   OpKind::kCast, OpKind::kIdentity}) {
    Graph g;
    Ops ops(g);
    IVec s{dim(1, 4), dim(1, 5), dim(1, 6)};
    ValueId x = ops.input("x", TensorType(DType::kF32, s));
    Attrs a;
    if (k == OpKind::kScale) a = {{"alpha", 0.75}};
    ops.output(ops.unary(k, x, a));
    bool pos = k == OpKind::kLog || k == OpKind::kSqrt || k == OpKind::kRsqrt;
    add(
        std::string(op_kind_name(k)), std::move(g),
        [k](const std::vector<Tensor>& in) {
          Tensor r(DType::kF32, in[0].shape());
          for_all(r.shape(), [&](const IVec& p) { r.set(p, unary_ref(k, in[0].at(p))); });
          return r;
        },
        pos ? 0.1 : -2.0, 2.0);
  }
  // --- binary with broadcasting ---
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kMaximum,
                   OpKind::kMinimum, OpKind::kPow}) {
    Graph g;
    Ops ops(g);
    int64_t m = dim(1, 5), n = dim(2, 6);
    ValueId a = ops.input("a", f32({m, n}));
    ValueId b = ops.input("b", f32({n}));
    if (k == OpKind::kSub) b = ops.input("b2", f32({m, 1}));
    ops.output(ops.binary(k, a, b));
    bool pos = k == OpKind::kDiv || k == OpKind::kPow;
    add(
        std::string(op_kind_name(k)), std::move(g),
        [k](const std::vector<Tensor>& in) {
          const Tensor& b = in.back();
          Tensor r(DType::kF32, in[0].shape());
          for_all(r.shape(), [&](const IVec& p) {
            r.set(p, binary_ref(k, in[0].at(p), b.at(bcast(b.shape(), p))));
          });
          return r;
        },
        pos ? 0.5 : -1.0, pos ? 2.0 : 1.0);
    if (k == OpKind::kSub) cases.back().inputs.erase(cases.back().inputs.begin() + 1);
  }
  {
    Graph g;
    Ops ops(g);
    int64_t m = dim(1, 4), n = dim(1, 5);
    ValueId c = ops.input("c", TensorType(DType::kBool, IVec{m, n}));
    ValueId a = ops.input("a", f32({m, n}));
    ValueId b = ops.input("b", f32({1, n}));
    ops.output(ops.where(c, a, b));
    add("where", std::move(g), [](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, in[1].shape());
      for_all(r.shape(), [&](const IVec& p) {
        r.set(p, in[0].at(p) != 0 ? in[1].at(p) : in[2].at(IVec{0, p[1]}));
      });
      return r;
    });
  }
  // --- reductions ---
  for (OpKind k :
       {OpKind::kReduceSum, OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceMin}) {
    for (bool keep : {false, true}) {
      Graph g;
      Ops ops(g);
      IVec s{dim(1, 4), dim(2, 5), dim(2, 6)};
      ValueId x = ops.input("x", TensorType(DType::kF32, s));
      ops.output(ops.reduce(k, x, {0, -1}, keep));
      add(std::string(op_kind_name(k)), std::move(g), [k, keep](const std::vector<Tensor>& in) {
        const IVec& s = in[0].shape();
        Tensor r(DType::kF32, keep ? IVec{1, s[1], 1} : IVec{s[1]});
        for (int64_t j = 0; j < s[1]; ++j) {
          double acc = k == OpKind::kReduceMax ? -INFINITY : k == OpKind::kReduceMin ? INFINITY : 0;
          for (int64_t i = 0; i < s[0]; ++i)
            for (int64_t l = 0; l < s[2]; ++l) {
              double v = in[0].at(IVec{i, j, l});
              acc = k == OpKind::kReduceMax   ? std::max(acc, v)
                    : k == OpKind::kReduceMin ? std::min(acc, v)
                                              : acc + v;
            }
          if (k == OpKind::kReduceMean) acc /= static_cast<double>(s[0] * s[2]);
          r.set(keep ? IVec{0, j, 0} : IVec{j}, acc);
        }
        return r;
      });
    }
  }
  // --- softmax family and norms (rows along the last or a middle axis) ---
  for (int64_t axis : {-1, 1}) {
    for (bool log : {false, true}) {
      Graph g;
      Ops ops(g);
      IVec s{dim(1, 3), dim(2, 6), dim(1, 4)};
      ValueId x = ops.input("x", TensorType(DType::kF32, s));
      ops.output(log ? ops.log_softmax(x, axis) : ops.softmax(x, axis));
      int64_t ax = axis < 0 ? 2 : axis;
      add(
          log ? "log_softmax" : "softmax", std::move(g),
          [ax, log](const std::vector<Tensor>& in) {
            Tensor r(DType::kF32, in[0].shape());
            for_all(r.shape(), [&](const IVec& p) {
              double den = 0;
              for (int64_t i = 0; i < in[0].shape()[ax]; ++i)
                den += std::exp(in[0].at(p.with(ax, i)));
              double v = in[0].at(p);
              r.set(p, log ? v - std::log(den) : std::exp(v) / den);
            });
            return r;
          },
          -3, 3);
    }
  }
  for (bool rms : {false, true}) {
    Graph g;
    Ops ops(g);
    int64_t h = dim(2, 8);
    IVec s{dim(1, 3), dim(1, 4), h};
    ValueId x = ops.input("x", TensorType(DType::kF32, s));
    ValueId gm = ops.input("gamma", f32({h}));
    ValueId bt = rms ? kNoValue : ops.input("beta", f32({h}));
    ops.output(rms ? ops.rmsnorm(x, gm, 1e-5) : ops.layernorm(x, gm, bt, 1e-5));
    add(rms ? "rmsnorm" : "layernorm", std::move(g), [rms](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, in[0].shape());
      int64_t H = in[0].shape()[2];
      for_all(r.shape(), [&](const IVec& p) {
        double mean = 0, sq = 0;
        for (int64_t i = 0; i < H; ++i) mean += in[0].at(p.with(2, i)) / H;
        for (int64_t i = 0; i < H; ++i) {
          double d = in[0].at(p.with(2, i)) - (rms ? 0 : mean);
          sq += d * d / H;
        }
        double v = (in[0].at(p) - (rms ? 0 : mean)) / std::sqrt(sq + 1e-5) * in[1].at(IVec{p[2]});
        if (!rms) v += in[2].at(IVec{p[2]});
        r.set(p, v);
      });
      return r;
    });
  }
  // --- convolution and pooling ---
  for (int variant = 0; variant < 4; ++variant) {
    Graph g;
    Ops ops(g);
    int64_t G = variant == 3 ? 2 : 1;
    int64_t N = dim(1, 2), C = G * dim(1, 3), CO = G * dim(1, 3), H = dim(5, 8), W = dim(5, 8);
    Conv2dOptions o;
    o.stride = {variant == 1 ? 2 : 1, variant == 2 ? 2 : 1};
    o.padding = variant == 0 ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{1, 2, 0, 1};
    o.dilation = {variant == 2 ? 2 : 1, 1};
    o.groups = G;
    int64_t KH = dim(1, 3), KW = dim(1, 3);
    ValueId x = ops.input("x", f32({N, C, H, W}));
    ValueId w = ops.input("w", f32({CO, C / G, KH, KW}));
    ops.output(ops.conv2d(x, w, o));
    IVec os = g.type(g.outputs()[0]).shape();
    add("conv2d v" + std::to_string(variant), std::move(g),
        [o, os, G](const std::vector<Tensor>& in) {
          Tensor r(DType::kF32, os);
          const IVec &xs = in[0].shape(), &ws = in[1].shape();
          int64_t cig = xs[1] / G, cog = os[1] / G;
          auto pad =
              o.padding.size() == 2 ? std::vector<int64_t>{o.padding[0], o.padding[1]} : o.padding;
          for_all(os, [&](const IVec& p) {
            int64_t grp = p[1] / cog;
            double acc = 0;
            for (int64_t ci = 0; ci < cig; ++ci)
              for (int64_t kh = 0; kh < ws[2]; ++kh)
                for (int64_t kw = 0; kw < ws[3]; ++kw) {
                  int64_t ih = p[2] * o.stride[0] - pad[0] + kh * o.dilation[0];
                  int64_t iw = p[3] * o.stride[1] - pad[1] + kw * o.dilation[1];
                  if (ih < 0 || iw < 0 || ih >= xs[2] || iw >= xs[3]) continue;
                  acc += in[0].at(IVec{p[0], grp * cig + ci, ih, iw}) *
                         in[1].at(IVec{p[1], ci, kh, kw});
                }
            r.set(p, acc);
          });
          return r;
        });
  }
  for (int variant = 0; variant < 4; ++variant) {
    Graph g;
    Ops ops(g);
    bool mx = variant % 2 == 0;
    Pool2dOptions o;
    o.kernel = {dim(2, 3), dim(2, 3)};
    o.stride = {variant < 2 ? 1 : 2, 2};
    o.padding = variant < 2 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{0, 0};
    ValueId x = ops.input("x", f32({dim(1, 2), dim(1, 3), dim(4, 7), dim(4, 7)}));
    ops.output(mx ? ops.maxpool2d(x, o) : ops.avgpool2d(x, o));
    IVec os = g.type(g.outputs()[0]).shape();
    add(mx ? "maxpool2d" : "avgpool2d", std::move(g), [o, os, mx](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, os);
      const IVec& xs = in[0].shape();
      for_all(os, [&](const IVec& p) {
        double acc = mx ? -INFINITY : 0;
        for (int64_t i = 0; i < o.kernel[0]; ++i)
          for (int64_t j = 0; j < o.kernel[1]; ++j) {
            int64_t h = p[2] * o.stride[0] - o.padding[0] + i,
                    w = p[3] * o.stride[1] - o.padding[1] + j;
            if (h < 0 || w < 0 || h >= xs[2] || w >= xs[3]) continue;
            double v = in[0].at(IVec{p[0], p[1], h, w});
            acc = mx ? std::max(acc, v) : acc + v;
          }
        r.set(p, mx ? acc : acc / static_cast<double>(o.kernel[0] * o.kernel[1]));
      });
      return r;
    });
  }
  {
    Graph g;
    Ops ops(g);
    ValueId x = ops.input("x", f32({dim(1, 3), dim(1, 4), dim(2, 5), dim(2, 5)}));
    ops.output(ops.global_avgpool(x));
    add("global_avgpool", std::move(g), [](const std::vector<Tensor>& in) {
      const IVec& s = in[0].shape();
      Tensor r(DType::kF32, IVec{s[0], s[1]});
      for_all(s, [&](const IVec& p) {
        IVec q{p[0], p[1]};
        r.set(q, r.at(q) + in[0].at(p) / static_cast<double>(s[2] * s[3]));
      });
      return r;
    });
  }
  // --- layout ---
  auto linear_copy = [](const IVec& os) {
    return [os](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, os);
      for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = in[0].f32()[i];
      return r;
    };
  };
  for (auto [from, to] :
       std::vector<std::pair<IVec, std::vector<int64_t>>>{{IVec{2, 3, 8}, {2, 3, 2, 4}},
                                                          {IVec{2, 3, 2, 4}, {6, 8}},
                                                          {IVec{6, 4}, {4, 6}},
                                                          {IVec{3, 1, 4}, {12}},
                                                          {IVec{4, 6}, {2, 2, 3, 2}}}) {
    Graph g;
    Ops ops(g);
    ValueId x = ops.input("x", TensorType(DType::kF32, from));
    ops.output(ops.reshape(x, to));
    add("reshape " + from.to_string() + " -> " + IVec(to).to_string(), std::move(g),
        linear_copy(IVec(to)));
  }
  {
    Graph g;
    Ops ops(g);
    ValueId x = ops.input("x", f32({dim(1, 3), dim(1, 4), dim(1, 5), dim(1, 2)}));
    ops.output(ops.transpose(x, {2, 0, 3, 1}));
    add("transpose", std::move(g), [](const std::vector<Tensor>& in) {
      const IVec& s = in[0].shape();
      Tensor r(DType::kF32, IVec{s[2], s[0], s[3], s[1]});
      for_all(s, [&](const IVec& p) { r.set(IVec{p[2], p[0], p[3], p[1]}, in[0].at(p)); });
      return r;
    });
  }
  {
    Graph g;
    Ops ops(g);
    ValueId x = ops.input("x", f32({5, 7}));
    ops.output(ops.slice(x, {1, 2}, {4, 7}));
    add("slice", std::move(g), [](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, IVec{3, 5});
      for_all(r.shape(), [&](const IVec& p) { r.set(p, in[0].at(IVec{p[0] + 1, p[1] + 2})); });
      return r;
    });
  }
  {
    Graph g;
    Ops ops(g);
    int64_t a = dim(1, 3), b = dim(1, 3), c = dim(1, 3);
    ValueId x = ops.input("x", f32({2, a})), y = ops.input("y", f32({2, b})),
            z = ops.input("z", f32({2, c}));
    ops.output(ops.concat({x, y, z}, 1));
    add("concat", std::move(g), [a, b, c](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, IVec{2, a + b + c});
      for_all(r.shape(), [&](const IVec& p) {
        int64_t j = p[1];
        r.set(p, j < a       ? in[0].at(p)
                 : j < a + b ? in[1].at(IVec{p[0], j - a})
                             : in[2].at(IVec{p[0], j - a - b}));
      });
      return r;
    });
  }
  {
    Graph g;
    Ops ops(g);
    ValueId x = ops.input("x", f32({3, 1}));
    ops.output(ops.broadcast(x, {2, 3, 4}));
    add("broadcast", std::move(g), [](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, IVec{2, 3, 4});
      for_all(r.shape(), [&](const IVec& p) { r.set(p, in[0].at(IVec{p[1], 0})); });
      return r;
    });
  }
  // --- embedding, cross-entropy, causal mask, rotary ---
  {
    Graph g;
    Ops ops(g);
    int64_t V = dim(2, 9), H = dim(1, 5);
    ValueId ids = ops.input("ids", i64({dim(1, 3), dim(1, 4)}));
    ValueId t = ops.input("table", f32({V, H}));
    ops.output(ops.embedding(ids, t));
    add(
        "embedding", std::move(g),
        [H](const std::vector<Tensor>& in) {
          const IVec& s = in[0].shape();
          Tensor r(DType::kF32, IVec{s[0], s[1], H});
          for_all(r.shape(), [&](const IVec& p) {
            r.set(p, in[1].at(IVec{static_cast<int64_t>(in[0].at(IVec{p[0], p[1]})), p[2]}));
          });
          return r;
        },
        -1, 1, V);
  }
  {
    Graph g;
    Ops ops(g);
    int64_t V = dim(2, 7);
    IVec s{dim(1, 3), dim(1, 4)};
    ValueId l = ops.input("logits", f32({s[0], s[1], V}));
    ValueId y = ops.input("labels", i64({s[0], s[1]}));
    ops.output(ops.cross_entropy(l, y));
    add(
        "cross_entropy", std::move(g),
        [V](const std::vector<Tensor>& in) {
          Tensor r(DType::kF32, in[1].shape());
          for_all(r.shape(), [&](const IVec& p) {
            double den = 0;
            for (int64_t v = 0; v < V; ++v) den += std::exp(in[0].at(IVec{p[0], p[1], v}));
            r.set(p, std::log(den) - in[0].at(IVec{p[0], p[1], static_cast<int64_t>(in[1].at(p))}));
          });
          return r;
        },
        -2, 2, V);
  }
  for (int64_t kx : {0, 2}) {
    Graph g;
    Ops ops(g);
    int64_t q = dim(1, 5);
    ValueId x = ops.input("x", f32({2, q, q + kx}));
    ops.output(ops.causal_mask(x));
    add("causal_mask", std::move(g), [kx](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, in[0].shape());
      for_all(r.shape(),
              [&](const IVec& p) { r.set(p, p[2] > p[1] + kx ? -INFINITY : in[0].at(p)); });
      return r;
    });
  }
  {
    Graph g;
    Ops ops(g);
    int64_t D = 2 * dim(1, 4);
    ValueId x = ops.input("x", f32({dim(1, 2), dim(1, 6), dim(1, 3), D}));
    ops.output(ops.rotary(x, 100.0));
    add("rotary", std::move(g), [D](const std::vector<Tensor>& in) {
      Tensor r(DType::kF32, in[0].shape());
      for_all(r.shape(), [&](const IVec& p) {
        int64_t i = p[3] / 2;
        double ang = static_cast<double>(p[1]) / std::pow(100.0, 2.0 * static_cast<double>(i) / D);
        double a = in[0].at(p.with(3, 2 * i)), b = in[0].at(p.with(3, 2 * i + 1));
        r.set(p, p[3] % 2 == 0 ? a * std::cos(ang) - b * std::sin(ang)
                               : a * std::sin(ang) + b * std::cos(ang));
      });
      return r;
    });
  }
  return cases;
}

TEST(Kernels, EveryCaseVerifiesAndMatchesNaiveAndSubBoxes) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 3; ++round) {
    auto cases = make_cases(rng);
    for (auto& c : cases) {
      SCOPED_TRACE(c.name + " round " + std::to_string(round));
      auto diags = verify(c.g);
      ASSERT_TRUE(diags.empty()) << diags.front().to_string();
      ASSERT_EQ(c.g.num_ops(), 1);
      auto whole = testing::run_whole(c.g, 0, c.inputs);
      Tensor want = c.naive(c.inputs);
      EXPECT_LT(testing::max_rel_diff(whole[0], want), 2e-5) << c.g.op(0).space.to_string();
      for (bool acc : {false, true}) {
        auto parts = testing::run_pieces(c.g, 0, c.inputs, rng, acc);
        if (c.g.op(0).space.has_reduce())
          EXPECT_LT(testing::max_rel_diff(parts[0], whole[0]), 2e-5);
        else
          EXPECT_TRUE(parts[0] == whole[0]) << "tiles differ bitwise";
      }
    }
  }
}

TEST(Kernels, OptimizerUpdatesMatchTheirFormulas) {
  std::mt19937 rng(7);
  Graph g;
  Ops ops(g);
  ValueId p = ops.input("p", f32({3, 4})), gr = ops.input("g", f32({3, 4})),
          m = ops.input("m", f32({3, 4})), v = ops.input("v", f32({3, 4}));
  AdamWOptions ao;
  ao.lr = 0.1;
  auto r = ops.adamw(p, gr, m, v, ao, 3);
  SgdOptions so;
  so.lr = 0.5;
  so.weight_decay = 0.1;
  auto s = ops.sgd_momentum(p, gr, m, so);
  ASSERT_TRUE(ops.ok());
  ASSERT_TRUE(verify(g).empty());
  std::vector<Tensor> in;
  for (ValueId x : g.inputs()) in.push_back(testing::random_tensor(g.type(x), rng, 0.0, 1.0));
  auto adam = testing::run_whole(g, 0, in);
  auto sgd = testing::run_whole(g, 1, {in[0], in[1], in[2]});
  for (int64_t i = 0; i < 12; ++i) {
    double P = in[0].f32()[i], G = in[1].f32()[i], M = in[2].f32()[i], V = in[3].f32()[i];
    double m1 = 0.9 * M + 0.1 * G, v1 = 0.999 * V + 0.001 * G * G;
    double mh = m1 / (1 - std::pow(0.9, 3)), vh = v1 / (1 - std::pow(0.999, 3));
    EXPECT_NEAR(adam[0].f32()[i], P - 0.1 * (mh / (std::sqrt(vh) + 1e-8) + 0.01 * P), 1e-5);
    EXPECT_NEAR(adam[1].f32()[i], m1, 1e-6);
    EXPECT_NEAR(adam[2].f32()[i], v1, 1e-6);
    double vel = 0.9 * M + G + 0.1 * P;
    EXPECT_NEAR(sgd[0].f32()[i], P - 0.5 * vel, 1e-5);
    EXPECT_NEAR(sgd[1].f32()[i], vel, 1e-6);
  }
}

TEST(Kernels, Top2GatingRespectsCapacity) {
  Graph g;
  Ops ops(g);
  ValueId p = ops.input("p", f32({4, 3}));
  auto gate = ops.topk_gating(p, 2, 2);
  ASSERT_EQ(gate.size(), 2u);
  ops.output(gate[0]);
  ops.output(gate[1]);
  ASSERT_TRUE(verify(g).empty());
  Tensor probs(DType::kF32, IVec{4, 3});
  // Every token prefers expert 0, then expert 1; expert 0 holds only two tokens.
  float rows[4][3] = {
      {0.6f, 0.3f, 0.1f}, {0.5f, 0.4f, 0.1f}, {0.7f, 0.1f, 0.2f}, {0.2f, 0.1f, 0.7f}};
  for (int s = 0; s < 4; ++s)
    for (int e = 0; e < 3; ++e) probs.f32()[s * 3 + e] = rows[s][e];
  auto out = testing::run_whole(g, 0, {probs});
  const Tensor& c = out[0];
  EXPECT_NEAR(c.at(IVec{0, 0, 0}), 0.6 / 0.9, 1e-6);
  EXPECT_NEAR(c.at(IVec{1, 0, 1}), 0.5 / 0.9, 1e-6);
  for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(c.at(IVec{2, 0, k}), 0.0);  // over capacity: dropped
  EXPECT_NEAR(c.at(IVec{2, 2, 0}), 0.2 / 0.9, 1e-6);  // token 2 still reaches expert 2
  EXPECT_NEAR(c.at(IVec{3, 2, 1}), 0.7 / 0.9, 1e-6);
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_EQ(out[1].f32()[i], c.f32()[i] > 0 ? 1.0f : 0.0f);
}

// Generated cases: every k from 1 to E against a direct reading of the rule (stable sort of each
// row by descending probability, the first k experts, slots in token order up to capacity).
TEST(Kernels, TopkGatingMatchesTheRuleOnGeneratedCases) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t S = 1 + static_cast<int64_t>(rng() % 9), E = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t k = 1 + static_cast<int64_t>(rng() % E), C = 1 + static_cast<int64_t>(rng() % 4);
    Graph g;
    Ops ops(g);
    auto gate = ops.topk_gating(ops.input("p", f32({S, E})), k, C);
    ASSERT_EQ(gate.size(), 2u) << ops.status().error().message;
    ops.output(gate[0]);
    ops.output(gate[1]);
    Tensor probs(DType::kF32, IVec{S, E});
    // Few distinct values, so ties are common.
    for (int64_t i = 0; i < S * E; ++i) probs.f32()[i] = static_cast<float>(rng() % 5) * 0.25f;
    auto out = testing::run_whole(g, 0, {probs});
    std::vector<double> want(static_cast<size_t>(S * E * C), 0.0);
    std::vector<float> want_mask(want.size(), 0.0f);
    std::vector<int64_t> used(static_cast<size_t>(E), 0);
    for (int64_t s = 0; s < S; ++s) {
      std::vector<int64_t> idx(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) idx[e] = e;
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
        return probs.f32()[s * E + a] > probs.f32()[s * E + b];
      });
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += probs.f32()[s * E + idx[j]];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = idx[j];
        if (used[e] < C) {
          want[(s * E + e) * C + used[e]] =
              sum > 0 ? probs.f32()[s * E + e] / sum : 1.0 / static_cast<double>(k);
          want_mask[(s * E + e) * C + used[e]] = 1.0f;
        }
        ++used[e];
      }
    }
    for (int64_t i = 0; i < S * E * C; ++i) {
      EXPECT_NEAR(out[0].f32()[i], want[i], 1e-6) << "trial " << trial << " element " << i;
      EXPECT_EQ(out[1].f32()[i], want_mask[i]) << "trial " << trial << " element " << i;
    }
  }
}

TEST(Kernels, BadLabelIsADiagnostic) {
  Graph g;
  Ops ops(g);
  ValueId l = ops.input("l", f32({2, 3}));
  ValueId y = ops.input("y", i64({2}));
  ops.output(ops.cross_entropy(l, y));
  Tensor L(DType::kF32, IVec{2, 3}), Y(DType::kI64, IVec{2});
  Y.i64()[1] = 5;
  Tensor out(DType::kF32, IVec{2});
  Status s = kernels::run(g.op(0), g.op(0).space.box(), {&L, &Y}, {&out});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("label 5"), std::string::npos);
}

}  // namespace
}  // namespace heddle
