// A generator of op forms as a user writes them in the text IR (issue #23): convolutions with
// random groups, strides, dilations and asymmetric padding, max/avg pooling, global pooling in
// both forms, einsums of random specs, softmax over any axis, transposes, slices, and elementwise
// ops and row sums reading a shifted box of their input (padded, or a part of it); optional
// attributes sometimes spelled out, sometimes left to their defaults, index dims in random order.
// Each form carries its textbook meaning, computed from the attributes (not from the
// projections), and a broken twin that breaks one verifier rule, with the words its diagnostic
// must contain.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "heddle/ops/Tensor.h"

namespace heddle::testing {

/// One generated op form: a graph `text` whose op `%y` is the form under test; its operands are
/// params (so training differentiates through the form) and `%loss` (the graph's output) is the
/// mean of `%y` squared.
struct OpForm {
  std::string family;  ///< the op kind and variant, e.g. "conv2d", "global_avgpool(window)"
  std::string text;    ///< the whole graph
  bool trains = true;  ///< false: autodiff refuses the form, naming the form that trains
  /// `%y` computed the textbook way from the attributes, given the op's inputs in order.
  std::function<Tensor(const std::vector<Tensor>&)> textbook;
  /// The same graph with one rule broken (empty when the family has no twin), and words its
  /// first verifier diagnostic contains.
  std::string broken_text, broken_expect;
};

namespace forms_detail {

using Terms = std::vector<std::pair<int64_t, std::string>>;

// `2*oh - 1`, `g + ci`, `0`: an affine row in the text form.
inline std::string affine(const Terms& terms, int64_t offset) {
  std::string s;
  for (const auto& [c, name] : terms) {
    if (c == 0) continue;
    if (!s.empty())
      s += c < 0 ? " - " : " + ";
    else if (c < 0)
      s += "-";
    int64_t a = c < 0 ? -c : c;
    s += (a == 1 ? "" : std::to_string(a) + "*") + name;
  }
  if (s.empty()) return std::to_string(offset);
  if (offset > 0) s += " + " + std::to_string(offset);
  if (offset < 0) s += " - " + std::to_string(-offset);
  return s;
}

inline std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::string rows(const std::vector<std::string>& r) {
  std::string s = "(";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + r[i];
  return s + ")";
}

inline std::string f32(const std::vector<int64_t>& shape) { return "f32" + list(shape); }

struct Dim {
  std::string name;
  int64_t extent;
  bool sum = false;
};

// `[n=2, ci=3:sum]` with the dims in the order given.
inline std::string space(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].name + "=" + std::to_string(dims[i].extent) +
         (dims[i].sum ? ":sum" : "");
  return s + "]";
}

// `{a=..., b=...}` from the entries given (none: nothing).
inline std::string attrs(const std::vector<std::pair<std::string, std::string>>& a) {
  if (a.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i].first + "=" + a[i].second;
  return s + "}";
}

// The graph around an op line: its operands as params, `%y`, and the loss mean(y^2).
inline std::string graph(const std::vector<std::pair<std::string, std::vector<int64_t>>>& params,
                         const std::vector<int64_t>& yshape, const std::string& op) {
  std::string s = "graph form {\n";
  for (const auto& [name, shape] : params) s += "  param %" + name + ": " + f32(shape) + "\n";
  s += "  %y: " + f32(yshape) + " = " + op + "\n";
  std::vector<Dim> d, r;
  std::vector<std::string> names;
  for (size_t i = 0; i < yshape.size(); ++i) {
    names.push_back("a" + std::to_string(i));
    d.push_back({names.back(), yshape[i]});
    r.push_back({names.back(), yshape[i], true});
  }
  s += "  %sq: " + f32(yshape) + " = square " + space(d) + " %y" + rows(names) + " -> " +
       rows(names) + "\n";
  s += "  %loss: f32[] = reduce_mean " + space(r) + " %sq" + rows(names) + " -> ()\n";
  return s + "  output %loss\n}\n";
}

// Calls f(p) for every coordinate of `shape` (nothing when a dim is 0).
inline void each(const std::vector<int64_t>& shape, const std::function<void(const IVec&)>& f) {
  for (int64_t s : shape)
    if (s <= 0) return;
  std::vector<int64_t> p(shape.size(), 0);
  for (;;) {
    f(IVec(p));
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++p[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      p[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool coin(int64_t one_in = 2) { return pick(1, one_in) == 1; }
  template <class T>
  void shuffle(std::vector<T>& v) {
    std::shuffle(v.begin(), v.end(), rng_);
  }

  OpForm conv2d() {
    const int64_t N = pick(1, 2), G = coin(3) ? 2 : 1, cig = pick(1, 3), cog = pick(1, 3);
    const int64_t K[2] = {pick(1, 3), pick(1, 3)}, s[2] = {pick(1, 3), pick(1, 3)},
                  d[2] = {pick(1, 3), pick(1, 3)};
    const std::vector<int64_t> pad = {pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
    int64_t e[2], X[2], O[2];
    for (int i = 0; i < 2; ++i) {
      e[i] = d[i] * (K[i] - 1) + 1;
      // Some window must touch the input (else the verifier refuses a padded read that never
      // touches its tensor).
      do {
        X[i] = pick(std::max<int64_t>(1, e[i] - pad[i] - pad[i + 2]), e[i] + 5);
        O[i] = (X[i] + pad[i] + pad[i + 2] - e[i]) / s[i] + 1;
      } while (s[i] * (O[i] - 1) - pad[i] + e[i] <= 0);
    }
    const bool padded = pad[0] || pad[1] || pad[2] || pad[3] || coin(4), bias = coin(3);
    std::vector<std::pair<std::string, std::string>> a;
    if (d[0] != 1 || d[1] != 1 || coin()) a.push_back({"dilation", list({d[0], d[1]})});
    if (G != 1 || coin()) a.push_back({"groups", std::to_string(G)});
    if (pad[0] == pad[2] && pad[1] == pad[3] && coin())
      a.push_back({"padding", list({pad[0], pad[1]})});
    else if (pad != std::vector<int64_t>{0, 0, 0, 0} || coin())
      a.push_back({"padding", list(pad)});
    if (s[0] != 1 || s[1] != 1 || coin()) a.push_back({"stride", list({s[0], s[1]})});
    std::vector<Dim> dims = {{"n", N}, {"co", cog}, {"oh", O[0]}, {"ow", O[1]}, {"ci", cig, true}};
    if (G > 1) dims.push_back({"g", G});
    shuffle(dims);
    Terms xc = {{1, "ci"}}, yc = {{1, "co"}};
    if (G > 1) {
      xc.insert(xc.begin(), {cig, "g"});
      yc.insert(yc.begin(), {cog, "g"});
    }
    auto op_line = [&](const std::vector<int64_t>& win, int64_t oh_extent, bool pad_mark,
                       const std::vector<std::pair<std::string, std::string>>& at) {
      std::vector<Dim> ds = dims;
      for (auto& dm : ds)
        if (dm.name == "oh") dm.extent = oh_extent;
      std::vector<std::string> xr = {"n", affine(xc, 0), affine({{s[0], "oh"}}, -pad[0]),
                                     affine({{s[1], "ow"}}, -pad[1])};
      return "conv2d" + attrs(at) + " " + space(ds) + " %x" + rows(xr) + list(win) +
             (pad_mark ? " padded" : "") + ", %w" + rows({affine(yc, 0), "ci", "0", "0"}) +
             list({1, 1, K[0], K[1]}) + (bias ? ", %b" + rows({affine(yc, 0)}) : "") + " -> " +
             rows({"n", affine(yc, 0), "oh", "ow"});
    };
    std::vector<std::pair<std::string, std::vector<int64_t>>> params = {
        {"x", {N, G * cig, X[0], X[1]}}, {"w", {G * cog, cig, K[0], K[1]}}};
    if (bias) params.push_back({"b", {G * cog}});
    OpForm f;
    f.family = bias ? "conv2d(bias)" : "conv2d";
    f.text = graph(params, {N, G * cog, O[0], O[1]}, op_line({1, 1, e[0], e[1]}, O[0], padded, a));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec{N, G * cog, O[0], O[1]});
      each({N, G * cog, O[0], O[1]}, [&](const IVec& p) {
        const int64_t g = p[1] / cog;
        double acc = bias ? in[2].at(IVec{p[1]}) : 0.0;
        each({cig, K[0], K[1]}, [&](const IVec& t) {
          int64_t h = p[2] * s[0] - pad[0] + t[1] * d[0], w = p[3] * s[1] - pad[1] + t[2] * d[1];
          if (h < 0 || h >= X[0] || w < 0 || w >= X[1]) return;
          acc +=
              in[0].at(IVec{p[0], g * cig + t[0], h, w}) * in[1].at(IVec{p[1], t[0], t[1], t[2]});
        });
        y.set(p, acc);
      });
      return y;
    };
    // The broken twin: one rule per draw.
    switch (pick(0, 3)) {
      case 0: {  // the window is not the dilated kernel (issue #23's segfault)
        // Smaller (the segfault) when the first window starts inside the input, so that the
        // smaller window still touches it; else larger.
        std::vector<int64_t> win = {1, 1, e[0] > 1 && pad[0] == 0 ? e[0] - 1 : e[0] + 1, e[1]};
        f.broken_text = graph(params, {N, G * cog, O[0], O[1]}, op_line(win, O[0], padded, a));
        f.broken_expect = "is not the dilated kernel";
        break;
      }
      case 1: {  // a stride attribute the projection does not step by
        auto b = a;
        b.erase(std::remove_if(b.begin(), b.end(), [](auto& kv) { return kv.first == "stride"; }),
                b.end());
        b.push_back({"stride", list({s[0] + 1, s[1]})});
        f.broken_text =
            graph(params, {N, G * cog, O[0], O[1]}, op_line({1, 1, e[0], e[1]}, O[0], padded, b));
        f.broken_expect = "attribute stride=";
        break;
      }
      default: {  // one output row more than the input and padding hold
        f.broken_text = graph(params, {N, G * cog, O[0] + 1, O[1]},
                              op_line({1, 1, e[0], e[1]}, O[0] + 1, padded, a));
        f.broken_expect = padded ? "beyond the bottom edge" : "outside the tensor";
        break;
      }
    }
    return f;
  }

  OpForm pool(bool max) {
    const bool rank4 = !coin(6);
    const int64_t N = pick(1, 2), C = pick(1, 3);
    const int64_t k[2] = {pick(1, 3), pick(1, 3)}, s[2] = {pick(1, 3), pick(1, 3)};
    const std::vector<int64_t> pad = {pick(0, k[0] - 1), pick(0, k[1] - 1), pick(0, k[0] - 1),
                                      pick(0, k[1] - 1)};
    int64_t X[2], O[2];
    for (int i = 0; i < 2; ++i) {
      X[i] = pick(std::max<int64_t>(1, k[i] - pad[i] - pad[i + 2]), k[i] + 6);
      O[i] = (X[i] + pad[i] + pad[i + 2] - k[i]) / s[i] + 1;
    }
    const bool padded = pad[0] || pad[1] || pad[2] || pad[3] || coin(4);
    std::vector<std::pair<std::string, std::string>> a = {{"kernel", list({k[0], k[1]})}};
    if (pad != std::vector<int64_t>{0, 0, 0, 0} || coin()) a.push_back({"padding", list(pad)});
    if (s[0] != k[0] || s[1] != k[1] || coin()) a.push_back({"stride", list({s[0], s[1]})});
    std::vector<Dim> dims = {{"c", C}, {"h", O[0]}, {"w", O[1]}};
    if (rank4) dims.push_back({"n", N});
    shuffle(dims);
    std::vector<std::string> lead = {"c"};
    if (rank4) lead.insert(lead.begin(), "n");
    std::vector<int64_t> xs = {C, X[0], X[1]}, ys = {C, O[0], O[1]};
    if (rank4) {
      xs.insert(xs.begin(), N);
      ys.insert(ys.begin(), N);
    }
    const std::string kind = max ? "maxpool2d" : "avgpool2d";
    auto op_line = [&](const std::vector<std::pair<std::string, std::string>>& at) {
      std::vector<std::string> xr = lead, yr = lead;
      xr.push_back(affine({{s[0], "h"}}, -pad[0]));
      xr.push_back(affine({{s[1], "w"}}, -pad[1]));
      yr.push_back("h");
      yr.push_back("w");
      std::vector<int64_t> win(lead.size(), 1);
      win.push_back(k[0]);
      win.push_back(k[1]);
      return kind + attrs(at) + " " + space(dims) + " %x" + rows(xr) + list(win) +
             (padded ? " padded" : "") + " -> " + rows(yr);
    };
    OpForm f;
    f.family = kind + (rank4 ? "" : "(rank 3)");
    f.trains = rank4;
    f.text = graph({{"x", xs}}, ys, op_line(a));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec(ys));
      const size_t r = ys.size();
      each(ys, [&](const IVec& p) {
        double acc = max ? -INFINITY : 0.0;
        each({k[0], k[1]}, [&](const IVec& t) {
          int64_t h = p[r - 2] * s[0] - pad[0] + t[0], w = p[r - 1] * s[1] - pad[1] + t[1];
          if (h < 0 || h >= X[0] || w < 0 || w >= X[1]) return;
          std::vector<int64_t> q(p.values());
          q[r - 2] = h;
          q[r - 1] = w;
          double v = in[0].at(IVec(q));
          acc = max ? std::max(acc, v) : acc + v;
        });
        y.set(p, max ? acc : acc / static_cast<double>(k[0] * k[1]));
      });
      return y;
    };
    auto b = a;
    if (O[0] > 1 && coin()) {  // a stride the projection does not step by
      b.erase(std::remove_if(b.begin(), b.end(), [](auto& kv) { return kv.first == "stride"; }),
              b.end());
      b.push_back({"stride", list({s[0] + 1, s[1]})});
      f.broken_expect = "attribute stride=";
    } else {  // a kernel that is not the window
      b[0].second = list({k[0] + 1, k[1]});
      f.broken_expect = "attribute kernel=";
    }
    f.broken_text = graph({{"x", xs}}, ys, op_line(b));
    return f;
  }

  OpForm global_avgpool() {
    const int64_t N = pick(1, 3), C = pick(1, 3), H = pick(1, 5), W = pick(1, 5);
    const bool window = coin();
    std::vector<Dim> dims = {{"n", N}, {"c", C}};
    if (!window) {
      dims.push_back({"h", H, true});
      dims.push_back({"w", W, true});
    }
    shuffle(dims);
    OpForm f;
    f.family = window ? "global_avgpool(window)" : "global_avgpool(reduce)";
    f.text = graph({{"x", {N, C, H, W}}}, {N, C},
                   "global_avgpool " + space(dims) +
                       (window ? " %x(n, c, 0, 0)" + list({1, 1, H, W}) : " %x(n, c, h, w)") +
                       " -> (n, c)");
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec{N, C});
      each({N, C}, [&](const IVec& p) {
        double acc = 0;
        each({H, W}, [&](const IVec& t) { acc += in[0].at(IVec{p[0], p[1], t[0], t[1]}); });
        y.set(p, acc / static_cast<double>(H * W));
      });
      return y;
    };
    return f;
  }

  OpForm einsum() {
    // Index dims i0..i{D-1}, each a distinct random letter; a random subset summed.
    const int64_t D = pick(2, 4);
    std::string pool = "abcdefghijklmnopqrstuvwxyz";
    shuffle_chars(pool);
    std::vector<Dim> dims;
    for (int64_t i = 0; i < D; ++i) dims.push_back({"i" + std::to_string(i), pick(1, 4), coin(3)});
    if (std::all_of(dims.begin(), dims.end(), [](const Dim& x) { return x.sum; }))
      dims[0].sum = false;
    const int64_t inputs = coin(4) ? 1 : 2;
    std::vector<std::vector<int64_t>> terms(static_cast<size_t>(inputs));
    for (int64_t i = 0; i < D; ++i) {
      // A summed dim must reach an input; a parallel one reaches the output and maybe inputs.
      bool placed = false;
      for (auto& t : terms)
        if (coin()) {
          t.push_back(i);
          placed = true;
        }
      if (!placed && (dims[static_cast<size_t>(i)].sum || coin()))
        terms[static_cast<size_t>(pick(0, inputs - 1))].push_back(i);
    }
    for (auto& t : terms) {
      if (t.empty()) t.push_back(pick(0, D - 1));
      shuffle(t);
    }
    std::vector<int64_t> out;
    for (int64_t i = 0; i < D; ++i)
      if (!dims[static_cast<size_t>(i)].sum) out.push_back(i);
    shuffle(out);
    auto letters = [&](const std::vector<int64_t>& t) {
      std::string s;
      for (int64_t i : t) s += pool[static_cast<size_t>(i)];
      return s;
    };
    auto shape = [&](const std::vector<int64_t>& t) {
      std::vector<int64_t> s;
      for (int64_t i : t) s.push_back(dims[static_cast<size_t>(i)].extent);
      return s;
    };
    auto names = [&](const std::vector<int64_t>& t) {
      std::vector<std::string> s;
      for (int64_t i : t) s.push_back(dims[static_cast<size_t>(i)].name);
      return rows(s);
    };
    auto line = [&](const std::string& spec, std::vector<Dim> ds) {
      std::string op = "einsum{spec=\"" + spec + "\"} " + space(ds) + " ";
      for (size_t i = 0; i < terms.size(); ++i)
        op += (i ? ", %x" : "%x") + std::to_string(i) + names(terms[i]);
      return op + " -> " + names(out);
    };
    std::string spec;
    for (size_t i = 0; i < terms.size(); ++i) spec += (i ? "," : "") + letters(terms[i]);
    spec += "->" + letters(out);
    std::vector<std::pair<std::string, std::vector<int64_t>>> params;
    for (size_t i = 0; i < terms.size(); ++i)
      params.push_back({"x" + std::to_string(i), shape(terms[i])});
    std::vector<Dim> shuffled = dims;
    shuffle(shuffled);
    OpForm f;
    f.family = "einsum";
    f.text = graph(params, shape(out), line(spec, shuffled));
    const std::vector<int64_t> extents = shape([&] {
      std::vector<int64_t> all(static_cast<size_t>(D));
      std::iota(all.begin(), all.end(), 0);
      return all;
    }());
    f.textbook = [=](const std::vector<Tensor>& in) {
      std::vector<int64_t> os;
      for (int64_t i : out) os.push_back(extents[static_cast<size_t>(i)]);
      Tensor y(DType::kF32, IVec(os));
      y.fill(0);
      each(extents, [&](const IVec& p) {
        double v = 1;
        for (size_t i = 0; i < terms.size(); ++i) {
          std::vector<int64_t> q;
          for (int64_t k : terms[i]) q.push_back(p[k]);
          v *= in[i].at(IVec(q));
        }
        std::vector<int64_t> q;
        for (int64_t k : out) q.push_back(p[k]);
        y.set(IVec(q), y.at(IVec(q)) + v);
      });
      return y;
    };
    // The broken twin: the spec gives one dim of input 0 another dim's letter (issue #23's
    // `ab,cd->ef`), or names one operand too many.
    // Swapping two letters only one term uses renames them consistently: swap one that another
    // term uses too.
    std::string bad = spec;
    const std::string rest = spec.substr(terms[0].size());
    for (size_t q = 1; q < terms[0].size() && bad == spec; ++q)
      if (rest.find(spec[0]) != std::string::npos || rest.find(spec[q]) != std::string::npos)
        std::swap(bad[0], bad[q]);
    if (bad == spec) bad.insert(0, "z,");
    f.broken_text = graph(params, shape(out), line(bad, shuffled));
    f.broken_expect = "attribute spec=";
    return f;
  }

  OpForm softmax(bool log) {
    const int64_t R = pick(2, 3), axis = pick(0, R - 1);
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < R; ++i) shape.push_back(pick(1, 5));
    shape[static_cast<size_t>(axis)] = pick(2, 6);
    std::vector<Dim> dims;
    std::vector<std::string> r;
    std::vector<int64_t> win;
    for (int64_t i = 0; i < R; ++i) {
      bool ax = i == axis;
      if (!ax) dims.push_back({"i" + std::to_string(i), shape[static_cast<size_t>(i)]});
      r.push_back(ax ? "0" : "i" + std::to_string(i));
      win.push_back(ax ? shape[static_cast<size_t>(i)] : 1);
    }
    shuffle(dims);
    const std::string kind = log ? "log_softmax" : "softmax";
    auto line = [&](const std::vector<std::pair<std::string, std::string>>& at) {
      std::string proj = rows(r) + list(win);
      return kind + attrs(at) + " " + space(dims) + " %x" + proj + " -> " + proj;
    };
    std::vector<std::pair<std::string, std::string>> a;
    if (axis != R - 1 || coin()) a.push_back({"axis", std::to_string(coin() ? axis : axis - R)});
    OpForm f;
    f.family = kind;
    f.text = graph({{"x", shape}}, shape, line(a));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec(shape));
      const int64_t n = shape[static_cast<size_t>(axis)];
      each(shape, [&](const IVec& p) {
        auto at = [&](int64_t j) { return in[0].at(p.with(axis, j)); };
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < n; ++j) m = std::max(m, at(j));
        for (int64_t j = 0; j < n; ++j) z += std::exp(at(j) - m);
        y.set(p, log ? at(p[axis]) - m - std::log(z) : std::exp(at(p[axis]) - m) / z);
      });
      return y;
    };
    f.broken_text = graph({{"x", shape}}, shape, line({{"axis", std::to_string((axis + 1) % R)}}));
    f.broken_expect = "attribute axis=";
    return f;
  }

  OpForm transpose() {
    const int64_t R = pick(2, 3);
    std::vector<int64_t> shape, perm(static_cast<size_t>(R));
    for (int64_t i = 0; i < R; ++i) shape.push_back(pick(1, 4));
    std::iota(perm.begin(), perm.end(), 0);
    shuffle(perm);
    std::vector<Dim> dims;
    std::vector<std::string> xr, yr;
    std::vector<int64_t> ys;
    for (int64_t i = 0; i < R; ++i) {
      dims.push_back({"i" + std::to_string(i), shape[static_cast<size_t>(i)]});
      xr.push_back("i" + std::to_string(i));
    }
    for (int64_t p : perm) {
      yr.push_back("i" + std::to_string(p));
      ys.push_back(shape[static_cast<size_t>(p)]);
    }
    shuffle(dims);
    auto line = [&](const std::vector<std::pair<std::string, std::string>>& at) {
      return "transpose" + attrs(at) + " " + space(dims) + " %x" + rows(xr) + " -> " + rows(yr);
    };
    OpForm f;
    f.family = "transpose";
    f.text = graph({{"x", shape}}, ys, coin(3) ? line({}) : line({{"perm", list(perm)}}));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec(ys));
      each(ys, [&](const IVec& q) {
        std::vector<int64_t> p(static_cast<size_t>(R));
        for (int64_t i = 0; i < R; ++i) p[static_cast<size_t>(perm[static_cast<size_t>(i)])] = q[i];
        y.set(q, in[0].at(IVec(p)));
      });
      return y;
    };
    std::vector<int64_t> bad = perm;
    std::swap(bad[0], bad[1]);
    f.broken_text = graph({{"x", shape}}, ys, line({{"perm", list(bad)}}));
    f.broken_expect = "attribute perm=";
    return f;
  }

  OpForm slice() {
    const int64_t R = pick(1, 3);
    std::vector<int64_t> shape, starts, ends, ys;
    std::vector<Dim> dims;
    std::vector<std::string> xr, yr;
    for (int64_t i = 0; i < R; ++i) {
      int64_t n = pick(1, 6), a = pick(0, n - 1), b = pick(a + 1, n);
      shape.push_back(n);
      starts.push_back(a);
      ends.push_back(b);
      ys.push_back(b - a);
      std::string name = "i" + std::to_string(i);
      dims.push_back({name, b - a});
      xr.push_back(affine({{1, name}}, a));
      yr.push_back(name);
    }
    shuffle(dims);
    auto line = [&](const std::vector<std::pair<std::string, std::string>>& at) {
      return "slice" + attrs(at) + " " + space(dims) + " %x" + rows(xr) + " -> " + rows(yr);
    };
    std::vector<std::pair<std::string, std::string>> a;
    if (coin(3)) a.push_back({"starts", list(starts)});
    if (coin(3)) a.push_back({"ends", list(ends)});
    OpForm f;
    f.family = "slice";
    f.text = graph({{"x", shape}}, ys, line(a));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec(ys));
      each(ys, [&](const IVec& q) { y.set(q, in[0].at(q + IVec(starts))); });
      return y;
    };
    std::vector<int64_t> bad = starts;
    bad[0] += 1;
    f.broken_text = graph({{"x", shape}}, ys, line({{"starts", list(bad)}, {"ends", list(ends)}}));
    f.broken_expect = "attribute starts=";
    return f;
  }

  // An elementwise op or a row sum reading a shifted box of its input: `%x(i - 1, j + 2) padded`,
  // or an unpadded part of it (`%x(i + 1, j)` over fewer rows).
  OpForm shifted() {
    const int64_t X[2] = {pick(1, 6), pick(1, 6)}, Y[2] = {pick(1, 6), pick(1, 6)};
    int64_t off[2];
    bool padded = coin() || Y[0] > X[0] || Y[1] > X[1];
    for (int i = 0; i < 2; ++i) off[i] = padded ? pick(-Y[i] + 1, X[i] - 1) : pick(0, X[i] - Y[i]);
    const bool sum = coin(3);
    const int kind = static_cast<int>(pick(0, 3));
    const char* names[] = {"relu", "neg", "square", "tanh"};
    std::vector<Dim> dims = {{"i", Y[0]}, {"j", Y[1], sum}};
    shuffle(dims);
    auto line = [&](bool pad_mark, int64_t o0) {
      return std::string(sum ? "reduce_sum" : names[kind]) + " " + space(dims) + " %x" +
             rows({affine({{1, "i"}}, o0), affine({{1, "j"}}, off[1])}) +
             (pad_mark ? " padded" : "") + " -> " + (sum ? "(i)" : "(i, j)");
    };
    std::vector<int64_t> ys = {Y[0]};
    if (!sum) ys.push_back(Y[1]);
    OpForm f;
    f.family = sum ? "shifted(reduce_sum)" : "shifted(" + std::string(names[kind]) + ")";
    f.text = graph({{"x", {X[0], X[1]}}}, ys, line(padded, off[0]));
    f.textbook = [=](const std::vector<Tensor>& in) {
      Tensor y(DType::kF32, IVec(ys));
      y.fill(0);
      each({Y[0], Y[1]}, [&](const IVec& p) {
        int64_t a = p[0] + off[0], b = p[1] + off[1];
        double v = a >= 0 && a < X[0] && b >= 0 && b < X[1] ? in[0].at(IVec{a, b}) : 0.0;
        if (sum) return y.set(IVec{p[0]}, y.at(IVec{p[0]}) + v);
        y.set(p, kind == 0 ? std::max(v, 0.0) : kind == 1 ? -v : kind == 2 ? v * v : std::tanh(v));
      });
      return y;
    };
    // The broken twin: rows past the end of the input, unpadded.
    f.broken_text = graph({{"x", {X[0], X[1]}}}, ys, line(false, X[0]));
    f.broken_expect = "outside the tensor";
    return f;
  }

 private:
  void shuffle_chars(std::string& s) { std::shuffle(s.begin(), s.end(), rng_); }

  std::mt19937_64 rng_;
};

}  // namespace forms_detail

namespace forms_detail {

struct Family {
  std::string name;
  OpForm (*draw)(Gen&);
};

inline const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"conv2d", [](Gen& g) { return g.conv2d(); }},
      {"maxpool2d", [](Gen& g) { return g.pool(true); }},
      {"avgpool2d", [](Gen& g) { return g.pool(false); }},
      {"global_avgpool", [](Gen& g) { return g.global_avgpool(); }},
      {"einsum", [](Gen& g) { return g.einsum(); }},
      {"softmax", [](Gen& g) { return g.softmax(false); }},
      {"log_softmax", [](Gen& g) { return g.softmax(true); }},
      {"transpose", [](Gen& g) { return g.transpose(); }},
      {"slice", [](Gen& g) { return g.slice(); }},
      {"shifted", [](Gen& g) { return g.shifted(); }},
  };
  return f;
}

}  // namespace forms_detail

/// The families random_form() draws from, in draw order.
inline std::vector<std::string> form_families() {
  std::vector<std::string> names;
  for (const auto& f : forms_detail::families()) names.push_back(f.name);
  return names;
}

/// A random op form of family `form_families()[seed % size]` (so consecutive seeds cycle through
/// every family), with shapes and attributes drawn from `seed`.
inline OpForm random_form(uint64_t seed) {
  forms_detail::Gen g(seed * 0x9E3779B97F4A7C15ull + 1);
  const auto& f = forms_detail::families();
  return f[seed % f.size()].draw(g);
}

}  // namespace heddle::testing
