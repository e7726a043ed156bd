#include "OpsTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "heddle/ir/GraphBuilder.h"
#include "heddle/ir/Verifier.h"
#include "heddle/ops/Autodiff.h"
#include "heddle/ops/Interpreter.h"
#include "heddle/ops/Kernel.h"
#include "heddle/ops/zoo/Zoo.h"

namespace heddle::testing {

void for_all(const IVec& shape, const std::function<void(const IVec&)>& f) {
  int64_t r = shape.size();
  for (int64_t s : shape)
    if (s == 0) return;
  std::vector<int64_t> p(static_cast<size_t>(r), 0);
  while (true) {
    f(IVec(p));
    int64_t d = r - 1;
    for (; d >= 0; --d) {
      if (++p[d] < shape[d]) break;
      p[d] = 0;
    }
    if (d < 0) return;
  }
}

Tensor random_tensor(const TensorType& t, std::mt19937& rng, double lo, double hi, int64_t int_hi) {
  Tensor x(t);
  if (x.is_int()) {
    std::uniform_int_distribution<int64_t> d(0, int_hi - 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.i64()[i] = d(rng);
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(d(rng));
  }
  return x;
}

std::vector<Tensor> run_whole(const Graph& g, OpId id, const std::vector<Tensor>& inputs,
                              const kernels::KernelOptions& options) {
  const Op& op = g.op(id);
  std::vector<Tensor> outs;
  for (const auto& r : op.results) outs.emplace_back(g.type(r.value));
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  std::vector<Tensor*> out;
  for (auto& t : outs) out.push_back(&t);
  Status s = kernels::run(op, op.space.box(), in, out, options);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return outs;
}

namespace {

void partition(const Box& b, std::mt19937& rng, int depth, std::vector<Box>& out) {
  std::vector<int64_t> splittable;
  for (int64_t d = 0; d < b.rank(); ++d)
    if (b.shape()[d] > 1) splittable.push_back(d);
  if (depth == 0 || splittable.empty()) {
    out.push_back(b);
    return;
  }
  int64_t d = splittable[std::uniform_int_distribution<size_t>(0, splittable.size() - 1)(rng)];
  int64_t cut = std::uniform_int_distribution<int64_t>(b.start()[d] + 1, b.end()[d] - 1)(rng);
  partition(Box(b.start(), b.end().with(d, cut)), rng, depth - 1, out);
  partition(Box(b.start().with(d, cut), b.end()), rng, depth - 1, out);
}

std::optional<Monoid> monoid_of(const Op& op) {
  for (const auto& d : op.space.dims())
    if (d.reduce) return d.reduce;
  return std::nullopt;
}

// Copies exactly the elements the points of `piece` write (a tile's bounding box may hold
// elements of other pieces when a projection merges dims).
void copy_written(const IndexProjection& proj, const Box& piece, const Tensor& tile, Tensor& dst) {
  for_all(piece.shape(), [&](const IVec& q) {
    IVec p = q + piece.start();
    Box w = proj.window_at(p);
    for_all(w.shape(), [&](const IVec& e) {
      IVec c = w.start() + e;
      dst.set(c, tile.at(c));
    });
  });
}

}  // namespace

std::vector<Tensor> run_pieces(const Graph& g, OpId id, const std::vector<Tensor>& inputs,
                               std::mt19937& rng, bool accumulate) {
  const Op& op = g.op(id);
  std::vector<Box> pieces;
  partition(op.space.box(), rng, 4, pieces);
  auto m = monoid_of(op);
  std::vector<Tensor> outs;
  for (const auto& r : op.results) {
    outs.emplace_back(g.type(r.value));
    if (m) outs.back().fill(kernels::monoid_identity(*m));
  }
  for (const Box& piece : pieces) {
    std::vector<Tensor> tiles;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      Box img = op.inputs[i].proj.image(piece).intersect(inputs[i].region());
      tiles.push_back(inputs[i].crop(img));
    }
    std::vector<const Tensor*> in;
    for (const auto& t : tiles) in.push_back(&t);
    std::vector<Tensor> otiles;
    std::vector<Tensor*> out;
    if (accumulate) {
      for (auto& t : outs) out.push_back(&t);
    } else {
      for (size_t i = 0; i < op.results.size(); ++i)
        otiles.push_back(Tensor::tile(outs[i].dtype(), op.results[i].proj.image(piece)));
      for (auto& t : otiles) out.push_back(&t);
    }
    kernels::KernelOptions ko;
    ko.accumulate = accumulate;
    Status s = kernels::run(op, piece, in, out, ko);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    if (!accumulate)
      for (size_t i = 0; i < otiles.size(); ++i) {
        if (m)
          kernels::combine(*m, outs[i], otiles[i]);
        else
          copy_written(op.results[i].proj, piece, otiles[i], outs[i]);
      }
  }
  return outs;
}

std::vector<Box> random_grid(const Box& box, std::mt19937& rng) {
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<std::vector<int64_t>> cuts(static_cast<size_t>(box.rank()));
  for (int64_t d = 0; d < box.rank(); ++d) {
    auto& c = cuts[d];
    c = {box.start()[d], box.end()[d]};
    if (box.end()[d] - box.start()[d] > 1 && pick(0, 1))
      for (int i = pick(1, 2); i > 0; --i) c.push_back(pick(box.start()[d] + 1, box.end()[d] - 1));
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
  }
  std::vector<Box> out;
  std::vector<size_t> at(cuts.size(), 0);
  for (;;) {
    std::vector<int64_t> lo, hi;
    for (size_t d = 0; d < cuts.size(); ++d) {
      lo.push_back(cuts[d][at[d]]);
      hi.push_back(cuts[d][at[d] + 1]);
    }
    out.emplace_back(IVec(lo), IVec(hi));
    size_t d = 0;
    for (; d < cuts.size(); ++d) {
      if (++at[d] + 1 < cuts[d].size()) break;
      at[d] = 0;
    }
    if (d == cuts.size()) return out;
  }
}

void run_piece_into(const Op& op, const Box& piece, const std::vector<const Tensor*>& ins,
                    Tensor& out, const kernels::KernelOptions& options) {
  const bool reduces = op.space.has_reduce();
  if (options.accumulate && reduces) {
    EXPECT_TRUE(kernels::run(op, piece, ins, {&out}, options).ok());
    return;
  }
  Tensor t = Tensor::tile(DType::kF32, op.results[0].proj.image(piece));
  t.fill(1e6);
  EXPECT_TRUE(kernels::run(op, piece, ins, {&t}, options).ok());
  if (reduces)
    kernels::combine(Monoid::kSum, out, t);
  else
    out.copy_from(t);
}

std::vector<Tensor> run_reference(const Graph& g, std::vector<Tensor> values) {
  kernels::KernelOptions ref;
  ref.reference = true;
  ref.direct_conv = true;
  for (const Op& op : g.ops()) {
    std::vector<const Tensor*> ins;
    for (const auto& x : op.inputs) ins.push_back(&values[x.value]);
    Tensor out(g.type(op.results[0].value));
    EXPECT_TRUE(kernels::run(op, op.space.box(), ins, {&out}, ref).ok()) << op_kind_name(op.kind);
    values[op.results[0].value] = std::move(out);
  }
  return values;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.is_int() != b.is_int())
    return std::numeric_limits<double>::infinity();
  double m = 0;
  for_all(a.shape(), [&](const IVec& p) {
    double x = a.at(p), y = b.at(p);
    if (std::isinf(x) && x == y) return;
    double d = std::fabs(x - y) / (1.0 + std::fabs(y));
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  });
  return m;
}

void check_gradients(const Graph& g, ValueId loss, double lo, double hi, std::mt19937& rng) {
  ASSERT_TRUE(verify(g).empty()) << verify(g).front().to_string();
  auto gr = build_gradients(g, loss);
  ASSERT_TRUE(gr.ok()) << gr.error().to_string();
  auto d = verify(gr->graph);
  ASSERT_TRUE(d.empty()) << d.front().to_string();
  ASSERT_FALSE(gr->grads.empty());

  std::vector<Tensor> inputs;
  for (ValueId v : g.inputs())
    inputs.push_back(
        testing::random_tensor(g.type(v), rng, -1, 1, g.type(v).dtype() == DType::kBool ? 2 : 5));
  Interpreter fwd(g), bwd(gr->graph);
  for (ValueId p : g.params()) {
    Tensor t = testing::random_tensor(g.type(p), rng, lo, hi);
    fwd.set_param(p, t);
    bwd.set_param(p, t);
  }
  ASSERT_TRUE(bwd.run(inputs).ok());
  for (auto [p, dv] : gr->grads) {
    const Tensor& analytic = bwd.value(dv);
    Tensor base = fwd.param(p);
    int64_t n = base.numel();
    for (int64_t k = 0; k < std::min<int64_t>(n, 6); ++k) {
      int64_t i = n <= 6 ? k : std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
      const double eps = 1e-3;
      Tensor t = base;
      t.f32()[i] = static_cast<float>(base.f32()[i] + eps);
      double step_up = t.f32()[i] - base.f32()[i];
      fwd.set_param(p, t);
      double lp = (*fwd.run(inputs))[0].f32()[0];
      t.f32()[i] = static_cast<float>(base.f32()[i] - eps);
      double step_dn = base.f32()[i] - t.f32()[i];
      fwd.set_param(p, t);
      double lm = (*fwd.run(inputs))[0].f32()[0];
      fwd.set_param(p, base);
      double fd = (lp - lm) / (step_up + step_dn);
      double a = analytic.f32()[i];
      EXPECT_NEAR(a, fd, 5e-3 + 5e-3 * std::fabs(fd))
          << "param " << g.value(p).name << " element " << i;
    }
  }
}

Graph small_train_graph(const char* name, int64_t seq, int64_t hidden, int64_t batch,
                        int64_t vocab) {
  zoo::ZooOverrides ov;
  ov.layers = 2;
  ov.seq = seq;
  ov.vocab = vocab;
  ov.hidden = hidden;
  ov.heads = 4;
  ov.batch = batch;
  zoo::ModelOptions mo;
  mo.with_loss = true;
  auto fwd = zoo::build_zoo_model(name, ov, mo);
  EXPECT_TRUE(fwd.ok()) << fwd.error().to_string();
  auto step = build_train_step(*fwd, {});
  EXPECT_TRUE(step.ok()) << step.error().to_string();
  return std::move(step->graph);
}

void for_each_chain(
    const Graph& g,
    const std::function<void(const std::vector<OpId>&, const std::vector<ValueId>&)>& f) {
  std::vector<int64_t> uses(static_cast<size_t>(g.num_values()), 0);
  for (const Op& op : g.ops())
    for (const auto& x : op.inputs) ++uses[x.value];
  std::vector<OpId> ops;
  std::vector<ValueId> temps;
  auto flush = [&] {
    if (ops.size() > 1) f(ops, temps);
    ops.clear();
    temps.clear();
  };
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    bool joins = false;
    if (!ops.empty() && is_elementwise(op.kind)) {
      const Op& last = g.op(ops.back());
      ValueId v = last.results[0].value;
      for (const auto& x : op.inputs) joins |= x.value == v;
      joins = joins && uses[v] == 1 && last.results.size() == 1;
    }
    if (!joins) flush();
    if (joins) temps.push_back(g.op(ops.back()).results[0].value);
    ops.push_back(id);
  }
  flush();
}

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

double tile_diff(const Tensor& a, const Tensor& b) {
  if (a.region() != b.region()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.f32()[i], y = b.f32()[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    m = std::max(m, std::isnan(x - y) ? INFINITY : std::fabs(x - y) / (1 + std::fabs(y)));
  }
  return m;
}

Box random_sub_box(const Box& b, std::mt19937& rng) {
  std::vector<int64_t> s, e;
  for (int64_t d = 0; d < b.rank(); ++d) {
    int64_t lo = b.start()[d], hi = b.end()[d];
    int64_t x = uniform(rng, lo, hi - 1), y = uniform(rng, lo, hi - 1);
    s.push_back(std::min(x, y));
    e.push_back(std::max(x, y) + 1);
  }
  return Box(IVec(s), IVec(e));
}

Box random_cover(const Box& inner, const Box& whole, std::mt19937& rng) {
  if (uniform(rng, 0, 1) == 0 || inner.empty()) return inner;
  std::vector<int64_t> s, e;
  for (int64_t d = 0; d < inner.rank(); ++d) {
    s.push_back(uniform(rng, whole.start()[d], inner.start()[d]));
    e.push_back(uniform(rng, inner.end()[d], whole.end()[d]));
  }
  return Box(IVec(s), IVec(e));
}

ValueId einsum_of(Ops& ops, const std::string& spec, const std::map<char, int64_t>& ext) {
  auto shape = [&](const std::string& x) {
    std::vector<int64_t> v;
    for (char ch : x) v.push_back(ext.at(ch));
    return f32(v);
  };
  size_t comma = spec.find(','), arrow = spec.find("->");
  ValueId a = ops.param("a", shape(spec.substr(0, comma)));
  ValueId b = ops.param("b", shape(spec.substr(comma + 1, arrow - comma - 1)));
  ops.output(ops.einsum(spec, a, b));
  return a;
}

Tensor nan_tile(const Box& box) {
  Tensor v = Tensor::tile(DType::kF32, box);
  for (int64_t i = 0; i < v.numel(); ++i) v.f32()[i] = NAN;
  return v;
}

bool all_nan(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isnan(t.f32()[i])) return false;
  return true;
}

}  // namespace heddle::testing
