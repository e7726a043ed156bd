#include "VerifyForms.h"

#include <array>
#include <map>

#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/WindowGeometry.h"

namespace heddle::verify_detail {

namespace {

std::string ints(const int64_t* v, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Row `r` of `p` as (dim, coefficient) when exactly one coefficient is nonzero; dim -1 for a
// zero row, -2 for a row that mixes several dims.
std::pair<int64_t, int64_t> single(const IndexProjection& p, int64_t r) {
  std::pair<int64_t, int64_t> out{-1, 0};
  for (int64_t k = 0; k < p.index_rank(); ++k) {
    int64_t c = p.map().at(r, k);
    if (c == 0) continue;
    if (out.first != -1) return {-2, 0};
    out = {k, c};
  }
  return out;
}

class FormChecker {
 public:
  FormChecker(const Graph& g, const Op& op) : g_(g), op_(op), names_(op.space.names()) {}

  std::vector<std::string> run() {
    switch (op_.kind) {
      case OpKind::kEinsum:
        einsum();
        break;
      case OpKind::kConv2d:
        conv2d();
        break;
      case OpKind::kMaxPool2d:
      case OpKind::kAvgPool2d:
        pool();
        break;
      case OpKind::kSoftmax:
      case OpKind::kLogSoftmax:
        softmax();
        break;
      case OpKind::kLayerNorm:
      case OpKind::kRmsNorm:
        norm();
        break;
      case OpKind::kTranspose:
        transpose();
        break;
      case OpKind::kSlice:
        slice();
        break;
      case OpKind::kTopkGating:
        gating();
        break;
      case OpKind::kConv2dGradInput:
      case OpKind::kConv2dGradWeight:
      case OpKind::kPool2dGrad:
        rank4_windows();
        break;
      default:
        break;
    }
    return std::move(out_);
  }

 private:
  void report(std::string m) { out_.push_back(std::move(m)); }
  const TensorType& type(const Operand& o) const { return g_.type(o.value); }
  std::string what(const char* kind, size_t i) const {
    const Operand& o = kind[0] == 'i' ? op_.inputs[i] : op_.results[i];
    return std::string(kind) + " " + std::to_string(i) + " (" + value_ref(g_.value(o.value).name) +
           ")";
  }
  std::string proj(const Operand& o) const { return o.proj.to_string(names_); }
  std::string dim(int64_t k) const { return "'" + names_[static_cast<size_t>(k)] + "'"; }

  // einsum: the spec names one index dim per letter; every operand row is one letter's dim.
  void einsum() {
    auto it = op_.attrs.find("spec");
    if (it == op_.attrs.end()) return;  // reported by the schema check
    const std::string& spec = std::get<std::string>(it->second);
    std::string q = "attribute spec=\"" + spec + "\"";
    size_t arrow = spec.find("->");
    if (arrow == std::string::npos) return report(q + " needs an explicit '->' output");
    std::vector<std::string> terms;
    std::string lhs = spec.substr(0, arrow);
    for (size_t start = 0;;) {
      size_t c = lhs.find(',', start);
      terms.push_back(lhs.substr(start, c == std::string::npos ? c : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    std::string outs = spec.substr(arrow + 2);
    if (terms.size() != op_.inputs.size())
      return report(q + " names " + std::to_string(terms.size()) + " operand(s) but the op has " +
                    std::to_string(op_.inputs.size()) + " input(s)");
    std::map<char, std::pair<int64_t, std::string>> dim_of;  // letter -> (dim, where first seen)
    std::vector<char> letter_of(names_.size(), 0);
    std::vector<std::string> letter_where(names_.size());
    auto visit = [&](const std::string& term, const Operand& o, const std::string& w) {
      if (static_cast<int64_t>(term.size()) != o.proj.tensor_rank()) {
        report(q + " gives " + w + " the term '" + term + "' of " + std::to_string(term.size()) +
               " letter(s), but its tensor " + type(o).to_string() + " has rank " +
               std::to_string(o.proj.tensor_rank()));
        return false;
      }
      for (int64_t r = 0; r < o.proj.tensor_rank(); ++r) {
        auto [d, c] = single(o.proj, r);
        if (d < 0 || c != 1 || o.proj.map().offset()[r] != 0 || o.proj.window()[r] != 1) {
          report(w + ": projection " + proj(o) + " is not a plain selection of index dims; " + q +
                 " names one index dim per tensor dim (write e.g. (m, k))");
          return false;
        }
        char l = term[static_cast<size_t>(r)];
        auto [at, fresh] = dim_of.emplace(l, std::make_pair(d, w));
        if (!fresh && at->second.first != d) {
          report(q + " disagrees with the projections: letter '" + std::string(1, l) +
                 "' is index dim " + dim(at->second.first) + " in " + at->second.second + " but " +
                 dim(d) + " in " + w + " " + proj(o));
          return false;
        }
        if (letter_of[d] && letter_of[d] != l) {
          report(q + " disagrees with the projections: index dim " + dim(d) + " is letter '" +
                 std::string(1, letter_of[d]) + "' in " + letter_where[d] + " but '" +
                 std::string(1, l) + "' in " + w + " " + proj(o));
          return false;
        }
        if (!letter_of[d]) letter_where[d] = w;
        letter_of[d] = l;
      }
      return true;
    };
    for (size_t i = 0; i < op_.inputs.size(); ++i)
      if (!visit(terms[i], op_.inputs[i], what("input", i))) return;
    if (!visit(outs, op_.results[0], what("result", 0))) return;
    for (size_t k = 0; k < names_.size(); ++k) {
      const IndexDim& d = op_.space.dim(static_cast<int64_t>(k));
      if (!letter_of[k]) {
        report("index dim " + dim(static_cast<int64_t>(k)) + " appears in no term of " + q);
        continue;
      }
      bool kept = outs.find(letter_of[k]) != std::string::npos;
      if (!kept && d.reduce != Monoid::kSum)
        report(q + " sums letter '" + std::string(1, letter_of[k]) +
               "' (absent from the output) but index dim " + dim(static_cast<int64_t>(k)) +
               (d.reduce ? " reduces with another monoid" : " is parallel") +
               "; declare it ':sum'");
    }
  }

  // conv2d: (n, g*cig + ci, s0*oh - pt, s1*ow - pl)[1, 1, d0*(KH-1)+1, d1*(KW-1)+1] for x,
  // (g*cog + co, ci, 0, 0)[1, 1, KH, KW] for w, (n, g*cog + co, oh, ow) for y.
  void conv2d() {
    const Operand &xo = op_.inputs[0], &wo = op_.inputs[1], &yo = op_.results[0];
    if (type(xo).rank() != 4 || type(wo).rank() != 4 || type(yo).rank() != 4)
      return report(
          "conv2d needs x [N, C, H, W], w [CO, C/groups, KH, KW] and a result [N, CO, "
          "OH, OW], got " +
          type(xo).to_string() + ", " + type(wo).to_string() + " and " + type(yo).to_string());
    auto geo = window_geometry(op_.kind, op_.attrs);
    if (!geo.ok()) return report(geo.error().message);
    const IndexProjection& yp = yo.proj;
    int64_t n = single(yp, 0).first, oh = single(yp, 2).first, ow = single(yp, 3).first, co = -1,
            g = -1, ci = -1, reduce_dims = 0;
    for (int64_t k = 0; k < yp.index_rank(); ++k) {
      if (op_.space.dim(k).reduce) {
        ci = k;
        ++reduce_dims;
      }
      if (yp.map().at(1, k) == 1 && (co < 0 || op_.space.dim(k).extent == 1)) co = k;
    }
    for (int64_t k = 0; k < yp.index_rank(); ++k)
      if (k != co && yp.map().at(1, k) != 0) g = k;
    std::string form = "(n, g*cog + co, oh, ow)";
    if (n < 0 || oh < 0 || ow < 0 || co < 0 || reduce_dims != 1 ||
        op_.space.dim(ci).reduce != Monoid::kSum)
      return report(what("result", 0) + ": projection " + proj(yo) + " over " +
                    op_.space.to_string() + " is not the conv2d form " + form +
                    " with one reduce(sum) dim ci");
    const int64_t cog = op_.space.dim(co).extent, cig = op_.space.dim(ci).extent,
                  G = g < 0 ? 1 : op_.space.dim(g).extent;
    if (g >= 0 && yp.map().at(1, g) != cog)
      return report(what("result", 0) + ": projection " + proj(yo) + " is not the conv2d form " +
                    form + " (the group dim must step by cog = " + std::to_string(cog) + ")");
    if (op_.space.rank() != (g < 0 ? 5 : 6))
      return report("conv2d's index space " + op_.space.to_string() +
                    " must hold exactly n, (g), co, oh, ow and the reduce dim ci");
    if (G != geo->groups)
      return report("attribute groups=" + std::to_string(geo->groups) +
                    (op_.attrs.count("groups") ? "" : " (the default)") +
                    " disagrees with the projections, which have " + std::to_string(G) +
                    " group(s)");
    const IVec &xs = type(xo).shape(), &ws = type(wo).shape();
    if (ws[0] != G * cog || ws[1] != cig || xs[1] != G * cig)
      return report("conv2d channels disagree: x " + type(xo).to_string() + ", w " +
                    type(wo).to_string() + " and " + std::to_string(G) + " group(s) of " +
                    std::to_string(cig) + " input and " + std::to_string(cog) +
                    " output channels (index dims ci and co)");
    if (xs[0] != type(yo).shape()[0])  // padding applies to H and W only (fuzz_text_ir_run)
      return report("conv2d batch disagrees: x " + type(xo).to_string() + " and the result " +
                    type(yo).to_string() + " must have the same N (a padded x pads H and W only)");
    const int64_t K[2] = {ws[2], ws[3]};
    std::vector<std::vector<int64_t>> rows(4, std::vector<int64_t>(names_.size(), 0));
    auto set = [&](int64_t r, int64_t k, int64_t c) {
      if (k >= 0) rows[r][k] = c;
    };
    // The weight.
    set(0, co, 1);
    set(0, g, cog);
    set(1, ci, 1);
    IndexProjection wp(AffineMap::from_rows(op_.space.rank(), rows, IVec{0, 0, 0, 0}),
                       IVec{1, 1, K[0], K[1]});
    if (wo.proj != wp || wo.padded)
      report(what("input", 1) + ": projection " + proj(wo) + " is not the conv2d weight form " +
             wp.to_string(names_) + " (the whole kernel, unpadded)");
    // The bias: one value per output channel, read where the result writes its channel.
    if (op_.inputs.size() > 2) {
      const Operand& bo = op_.inputs[2];
      std::vector<std::vector<int64_t>> brow(1, std::vector<int64_t>(names_.size(), 0));
      brow[0][static_cast<size_t>(co)] = 1;
      if (g >= 0) brow[0][static_cast<size_t>(g)] = cog;
      IndexProjection bp(AffineMap::from_rows(op_.space.rank(), brow, IVec{0}), IVec{1});
      if (type(bo).shape() != IVec{G * cog} || bo.proj != bp || bo.padded)
        report(what("input", 2) + ": " + type(bo).to_string() + " " + proj(bo) +
               " is not the conv2d bias form [" + std::to_string(G * cog) + "] " +
               bp.to_string(names_) + " (one value per output channel, unpadded)");
    }
    // The input: stride, padding and the dilated kernel against the projection.
    std::string why = op_.attrs.count("stride") ? "" : " (the default)";
    int64_t step[2], start[2], keff[2];
    for (int i = 0; i < 2; ++i) {
      auto [d, c] = single(xo.proj, 2 + i);
      step[i] = d == (i ? ow : oh) ? c : 0;
      start[i] = xo.proj.map().offset()[2 + i];
      __int128 span = static_cast<__int128>(geo->dilation[i]) * (K[i] - 1) + 1;
      keff[i] = span > (int64_t{1} << 50) ? int64_t{1} << 50 : static_cast<int64_t>(span);
    }
    bool fine = true;
    if (step[0] != geo->stride[0] || step[1] != geo->stride[1]) {
      fine = false;
      report("attribute stride=" + ints(geo->stride.data(), 2) +
             (op_.attrs.count("stride") ? "" : " (the default)") +
             " disagrees with the projection " + proj(xo) + " of " + what("input", 0) +
             ", which steps oh and ow by " + ints(step, 2));
    }
    if (start[0] != -geo->padding[0] || start[1] != -geo->padding[1]) {
      fine = false;
      int64_t neg[2] = {-start[0], -start[1]};
      report("attribute padding=" + ints(geo->padding.data(), 4) +
             (op_.attrs.count("padding") ? "" : " (the default)") +
             " disagrees with the projection " + proj(xo) + " of " + what("input", 0) +
             ", which pads " + ints(neg, 2) + " at the top and left");
    }
    if (xo.proj.window()[2] != keff[0] || xo.proj.window()[3] != keff[1]) {
      fine = false;
      int64_t win[2] = {xo.proj.window()[2], xo.proj.window()[3]};
      report(what("input", 0) + ": window " + ints(win, 2) + " of " + proj(xo) +
             " is not the dilated kernel " + ints(keff, 2) + ": the " + std::to_string(K[0]) + "x" +
             std::to_string(K[1]) + " kernel of " + what("input", 1) +
             " with dilation=" + ints(geo->dilation.data(), 2) +
             (op_.attrs.count("dilation") ? "" : " (the default)") + " spans " + ints(keff, 2));
    }
    if (!fine) return;
    set(0, co, 0);
    set(0, g, 0);
    set(1, ci, 0);
    set(0, n, 1);
    set(1, g, cig);
    set(1, ci, 1);
    set(2, oh, geo->stride[0]);
    set(3, ow, geo->stride[1]);
    IndexProjection xp(AffineMap::from_rows(op_.space.rank(), rows,
                                            IVec{0, 0, -geo->padding[0], -geo->padding[1]}),
                       IVec{1, 1, keff[0], keff[1]});
    if (xo.proj != xp)
      return report(what("input", 0) + ": projection " + proj(xo) + " is not the conv2d form " +
                    xp.to_string(names_));
    reach(xo, geo->padding.data());
  }

  // The bottom and right reach of a window over the last two dims stays inside the padding.
  void reach(const Operand& xo, const int64_t* pad) {
    Box img = xo.proj.image(op_.space.box());
    const IVec& xs = type(xo).shape();
    int64_t r0 = xs.size() - 2;
    for (int i = 0; i < 2; ++i) {
      int64_t over = img.end()[r0 + i] - xs[r0 + i];
      if (over > pad[2 + i])
        report(what("input", 0) + ": projection " + proj(xo) + " reads " + std::to_string(over) +
               " beyond the " + (i ? "right" : "bottom") + " edge of " + type(xo).to_string() +
               " but attribute padding=" + ints(pad, 4) + " allows " + std::to_string(pad[2 + i]) +
               " (fewer output positions, or more padding)");
    }
  }

  // Pooling over the last two dims: (..., s0*oh - pt, s1*ow - pl)[..., k0, k1], result identity.
  void pool() {
    const Operand &xo = op_.inputs[0], &yo = op_.results[0];
    int64_t rank = type(xo).rank();
    if (rank < 2 || type(yo).rank() != rank)
      return report(
          "pooling needs x and its result of equal rank >= 2 (windows over the last two "
          "dims), got " +
          type(xo).to_string() + " and " + type(yo).to_string());
    auto geo = window_geometry(op_.kind, op_.attrs);
    if (!geo.ok()) return report(geo.error().message);
    for (const auto& d : op_.space.dims())
      if (d.reduce)
        return report("pooling has no reduce dims (the window is reduced); index dim '" + d.name +
                      "' is one");
    std::vector<int64_t> res_dim;
    for (int64_t r = 0; r < rank; ++r) {
      auto [d, c] = single(yo.proj, r);
      if (d < 0 || c != 1 || yo.proj.window()[r] != 1)
        return report(what("result", 0) + ": projection " + proj(yo) +
                      " must name one index dim per tensor dim");
      res_dim.push_back(d);
    }
    int64_t step[2], start[2], win[2];
    bool rows_ok = true;
    for (int64_t r = 0; r < rank; ++r) {
      auto [d, c] = single(xo.proj, r);
      bool spatial = r >= rank - 2;
      if (d != res_dim[r] && !(d == -1 && op_.space.dim(res_dim[r]).extent == 1)) rows_ok = false;
      if (!spatial && (c != 1 || xo.proj.map().offset()[r] != 0 || xo.proj.window()[r] != 1))
        rows_ok = false;
      if (spatial) {
        size_t i = static_cast<size_t>(r - (rank - 2));
        step[i] = d == res_dim[r] ? c : 0;
        start[i] = xo.proj.map().offset()[r];
        win[i] = xo.proj.window()[r];
      }
    }
    if (!rows_ok)
      return report(what("input", 0) + ": projection " + proj(xo) +
                    " is not the pooling form: each dim reads its result dim, the last two "
                    "through a window (s*oh - pad)[k]");
    auto absent = [&](const char* a) {
      return op_.attrs.count(a) ? std::string() : std::string(" (the default)");
    };
    bool fine = true;
    if (win[0] != geo->kernel[0] || win[1] != geo->kernel[1]) {
      fine = false;
      report("attribute kernel=" + ints(geo->kernel.data(), 2) + " disagrees with the window " +
             ints(win, 2) + " of " + what("input", 0) + " " + proj(xo));
    }
    if ((step[0] != geo->stride[0] && op_.space.dim(res_dim[rank - 2]).extent > 1) ||
        (step[1] != geo->stride[1] && op_.space.dim(res_dim[rank - 1]).extent > 1)) {
      fine = false;
      report("attribute stride=" + ints(geo->stride.data(), 2) +
             (op_.attrs.count("stride") ? "" : " (the default: the kernel)") +
             " disagrees with the projection " + proj(xo) + " of " + what("input", 0) +
             ", which steps by " + ints(step, 2));
    }
    if (start[0] != -geo->padding[0] || start[1] != -geo->padding[1]) {
      fine = false;
      int64_t neg[2] = {-start[0], -start[1]};
      report("attribute padding=" + ints(geo->padding.data(), 4) + absent("padding") +
             " disagrees with the projection " + proj(xo) + " of " + what("input", 0) +
             ", which pads " + ints(neg, 2) + " at the top and left");
    }
    for (int i = 0; i < 4 && fine; ++i)
      if (geo->padding[i] >= geo->kernel[i % 2]) {
        fine = false;
        report("attribute padding=" + ints(geo->padding.data(), 4) +
               " must be smaller than the kernel " + ints(geo->kernel.data(), 2) +
               " (a window inside the padding has no element)");
      }
    if (fine) reach(xo, geo->padding.data());
  }

  // softmax / log_softmax: the window spans exactly tensor dim `axis`; the result reads back the
  // same window.
  // topk_gating: one point reading all of probs [S, E]; both results are [S, E, capacity];
  // 1 <= k <= E.
  void gating() {
    const Operand& po = op_.inputs[0];
    const TensorType& pt = type(po);
    if (pt.rank() != 2)
      return report(what("input", 0) + " must be [tokens, experts], got " + pt.to_string());
    const int64_t S = pt.shape()[0], E = pt.shape()[1];
    auto attr = [&](const char* name, int64_t dflt) {
      auto it = op_.attrs.find(name);
      return it == op_.attrs.end() ? dflt : std::get<int64_t>(it->second);
    };
    const int64_t k = attr("k", 2), capacity = attr("capacity", 1);
    if (k < 1 || k > E)
      report("attribute k=" + std::to_string(k) + " must be in [1, experts = " + std::to_string(E) +
             "] for " + what("input", 0) + " " + pt.to_string());
    if (capacity < 1) report("attribute capacity=" + std::to_string(capacity) + " must be >= 1");
    if (op_.space.rank() != 0)
      report("the index space must be a single point (the gate reads every token in order)");
    auto whole = [&](const Operand& o) {
      for (int64_t r = 0; r < type(o).rank(); ++r)
        if (o.proj.window()[r] != type(o).shape()[r] || o.proj.map().offset()[r] != 0) return false;
      return true;
    };
    if (!whole(po))
      report(what("input", 0) + ": projection " + proj(po) + " must read the whole tensor");
    const int64_t want[3] = {S, E, capacity};
    for (size_t i = 0; i < op_.results.size(); ++i) {
      const Operand& ro = op_.results[i];
      if (type(ro).shape() != IVec{S, E, capacity})
        report(what("result", i) + " must be " + ints(want, 3) +
               " (tokens, experts, capacity), got " + type(ro).to_string());
      else if (!whole(ro))
        report(what("result", i) + ": projection " + proj(ro) + " must write the whole tensor");
    }
  }

  void softmax() {
    const Operand &xo = op_.inputs[0], &yo = op_.results[0];
    int64_t rank = type(xo).rank();
    int64_t axis = -1;
    auto it = op_.attrs.find("axis");
    if (it != op_.attrs.end()) axis = std::get<int64_t>(it->second);
    int64_t ax = axis < 0 ? axis + rank : axis;
    if (ax < 0 || ax >= rank)
      return report("attribute axis=" + std::to_string(axis) + " is out of range for " +
                    type(xo).to_string());
    std::vector<int64_t> spans;
    for (int64_t r = 0; r < rank; ++r)
      if (xo.proj.window()[r] > 1) spans.push_back(r);
    bool whole = single(xo.proj, ax).first == -1 && xo.proj.map().offset()[ax] == 0 &&
                 xo.proj.window()[ax] == type(xo).shape()[ax];
    if (!whole || spans.size() > 1 || (spans.size() == 1 && spans[0] != ax))
      report("attribute axis=" + std::to_string(axis) +
             (it == op_.attrs.end() ? " (the default: the last dim)" : "") +
             " disagrees with the projection " + proj(xo) + " of " + what("input", 0) +
             ": the window must span all of tensor dim " + std::to_string(ax) +
             " (offset 0, no index dim) and nothing else");
    if (yo.proj != xo.proj)
      report(what("result", 0) + ": projection " + proj(yo) + " must equal the input's " +
             proj(xo) + " (the normalized row is written where it was read)");
  }

  // layernorm / rmsnorm: each index point normalizes input 0's window; gain and bias windows
  // and the result window hold the same number of elements.
  void norm() {
    const Operand& xo = op_.inputs[0];
    int64_t n = xo.proj.window().product();
    for (size_t i = 1; i < op_.inputs.size(); ++i)
      if (op_.inputs[i].proj.window().product() != n)
        report(what("input", i) + ": window of " + proj(op_.inputs[i]) + " holds " +
               std::to_string(op_.inputs[i].proj.window().product()) +
               " elements but the normalized window of " + what("input", 0) + " " + proj(xo) +
               " holds " + std::to_string(n) + " (gain and bias are one per normalized element)");
    if (op_.results[0].proj != xo.proj)
      report(what("result", 0) + ": projection " + proj(op_.results[0]) +
             " must equal the input's " + proj(xo) +
             " (the normalized row is written where it was read)");
  }

  // transpose{perm}: result dim i holds input dim perm[i], i.e. both rows name the same index dim.
  void transpose() {
    auto it = op_.attrs.find("perm");
    if (it == op_.attrs.end()) return;
    const auto& perm = std::get<std::vector<int64_t>>(it->second);
    const Operand &xo = op_.inputs[0], &yo = op_.results[0];
    int64_t rank = type(yo).rank();
    std::string q = "attribute perm=" + ints(perm.data(), perm.size());
    if (static_cast<int64_t>(perm.size()) != rank || type(xo).rank() != rank)
      return report(q + " must have one entry per dim of " + type(yo).to_string());
    for (int64_t i = 0; i < rank; ++i) {
      int64_t p = perm[static_cast<size_t>(i)];
      bool same = p >= 0 && p < rank;
      for (int64_t k = 0; same && k < xo.proj.index_rank(); ++k)
        same = xo.proj.map().at(p, k) == yo.proj.map().at(i, k);
      if (!same)
        return report(q + " disagrees with the projections: result dim " + std::to_string(i) +
                      " of " + proj(yo) + " is not input dim " + std::to_string(p) + " of " +
                      proj(xo));
    }
  }

  // slice{starts, ends}: the input reads [starts, ends) per dim, shifted by the projection's
  // offset.
  void slice() {
    const Operand &xo = op_.inputs[0], &yo = op_.results[0];
    int64_t rank = type(xo).rank();
    for (const char* a : {"starts", "ends"}) {
      auto it = op_.attrs.find(a);
      if (it == op_.attrs.end()) continue;
      const auto& v = std::get<std::vector<int64_t>>(it->second);
      std::string q = std::string("attribute ") + a + "=" + ints(v.data(), v.size());
      if (static_cast<int64_t>(v.size()) != rank || type(yo).rank() != rank)
        return report(q + " must have one entry per dim of " + type(xo).to_string());
      for (int64_t r = 0; r < rank; ++r) {
        int64_t start = xo.proj.map().offset()[r];
        int64_t want = a[0] == 's' ? start : start + type(yo).shape()[r];
        if (v[static_cast<size_t>(r)] != want)
          return report(q + " disagrees with the projection " + proj(xo) + " of " +
                        what("input", 0) + ", which reads dim " + std::to_string(r) + " from " +
                        std::to_string(start) + " to " +
                        std::to_string(start + type(yo).shape()[r]));
      }
    }
  }

  // The gradient kernels of convolution and pooling read rank-4 NCHW windows.
  void rank4_windows() {
    for (size_t i = 0; i < op_.inputs.size(); ++i)
      if (type(op_.inputs[i]).rank() != 4)
        report(what("input", i) + " must be rank 4 (NCHW), got " + type(op_.inputs[i]).to_string());
    if (type(op_.results[0]).rank() != 4)
      report(what("result", 0) + " must be rank 4 (NCHW), got " + type(op_.results[0]).to_string());
    if (is_conv_kind(op_.kind) || is_pool_kind(op_.kind)) {
      auto geo = window_geometry(op_.kind, op_.attrs);
      if (!geo.ok()) report(geo.error().message);
    }
  }

  const Graph& g_;
  const Op& op_;
  std::vector<std::string> names_;
  std::vector<std::string> out_;
};

}  // namespace

std::vector<std::string> check_form(const Graph& g, OpId id) {
  return FormChecker(g, g.op(id)).run();
}

}  // namespace heddle::verify_detail
