// ONNX recurrent nodes (LSTM, GRU, RNN) unrolled over their fixed sequence length into einsum,
// slice, concat and pointwise ops: heddle's IR has no loops, and an unrolled step is an ordinary
// subgraph that shards, costs, trains and runs like any other.
#include <string>
#include <vector>

#include "OnnxImporter.h"

namespace heddle::onnx_detail {

namespace {

// One recurrent node's shape and options.
struct Cell {
  std::string kind;  // LSTM, GRU or RNN
  int64_t gates = 1, hidden = 0, seq = 0, batch = 0, input = 0, dirs = 1;
  bool reverse = false, linear_before_reset = false;
  std::vector<std::string> acts;  // per direction: f, g[, h]
};

// `x` cut to [lo, hi) along `axis`.
ValueId cut(Ops& ops, ValueId x, int64_t axis, int64_t lo, int64_t hi) {
  const IVec& s = ops.shape(x);
  std::vector<int64_t> starts(static_cast<size_t>(s.size()), 0), ends(s.begin(), s.end());
  starts[axis] = lo;
  ends[axis] = hi;
  return ops.slice(x, starts, ends);
}

// Row `d` of `x` [D, ...] as a value of shape [...].
ValueId row(Ops& ops, ValueId x, int64_t d) {
  const IVec& s = ops.shape(x);
  return ops.reshape(cut(ops, x, 0, d, d + 1), std::vector<int64_t>(s.begin() + 1, s.end()));
}

ValueId act(Ops& ops, const std::string& name, ValueId x) {
  if (name == "Sigmoid") return ops.unary(OpKind::kSigmoid, x);
  if (name == "Tanh") return ops.tanh(x);
  return ops.relu(x);  // validated: Relu
}

// Gate `k` (of width `h`) of `g` [B, gates * h].
ValueId gate(Ops& ops, ValueId g, int64_t k, int64_t h) { return cut(ops, g, 1, k * h, k * h + h); }

// The attributes of `n`, validated against what is unrolled.
Result<Cell> read_cell(Importer& im, const onnx::NodeProto& n, const IVec& x) {
  Cell c;
  c.kind = n.op_type();
  c.gates = c.kind == "LSTM" ? 4 : c.kind == "GRU" ? 3 : 1;
  std::string dir = attr_string(n, "direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return im.error(n, "direction '" + dir + "' is not forward, reverse or bidirectional");
  c.dirs = dir == "bidirectional" ? 2 : 1;
  c.reverse = dir == "reverse";
  c.hidden = attr_int(n, "hidden_size", 0);
  if (c.hidden < 1) return im.error(n, "'hidden_size' must be set and positive");
  if (find_attr(n, "clip")) return im.error(n, "'clip' is not supported");
  if (attr_int(n, "input_forget", 0) != 0) return im.error(n, "input_forget=1 is not supported");
  if (find_attr(n, "activation_alpha") || find_attr(n, "activation_beta"))
    return im.error(n, "activations with alpha/beta are not supported");
  c.linear_before_reset = attr_int(n, "linear_before_reset", 0) != 0;
  int64_t per_dir = c.kind == "LSTM" ? 3 : c.kind == "GRU" ? 2 : 1;
  std::vector<std::string> acts;
  if (const onnx::AttributeProto* a = find_attr(n, "activations"))
    for (const auto& s : a->strings()) acts.push_back(s);
  if (acts.empty()) {
    std::vector<std::string> dflt = c.kind == "RNN" ? std::vector<std::string>{"Tanh"}
                                    : c.kind == "GRU"
                                        ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                        : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < c.dirs; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  }
  if (static_cast<int64_t>(acts.size()) != per_dir * c.dirs)
    return im.error(n, "'activations' needs " + std::to_string(per_dir * c.dirs) + " entries");
  for (const auto& a : acts)
    if (a != "Sigmoid" && a != "Tanh" && a != "Relu")
      return im.error(n, "activation '" + a + "' is not supported (Sigmoid, Tanh, Relu are)");
  c.acts = acts;
  if (x.size() != 3) return im.error(n, "input X must be rank 3");
  bool batch_major = attr_int(n, "layout", 0) != 0;
  c.seq = x[batch_major ? 1 : 0];
  c.batch = x[batch_major ? 0 : 1];
  c.input = x[2];
  return c;
}

// Checks that input `k` of `n`, when present, has shape `want`; returns it as a value or kNoValue.
Result<ValueId> optional_input(Importer& im, const onnx::NodeProto& n, int k, const IVec& want,
                               const char* what) {
  if (n.input_size() <= k || n.input(k).empty()) return kNoValue;
  if (!im.has(n.input(k))) return im.error(n, std::string("input '") + what + "' is undefined");
  if (im.type(n.input(k)).shape() != want || im.type(n.input(k)).dtype() != DType::kF32)
    return im.error(n, std::string("input '") + what + "' must be f32" + want.to_string() +
                           ", got " + im.type(n.input(k)).to_string());
  return im.value(n.input(k));
}

Status recurrent(Importer& im, const onnx::NodeProto& n) {
  auto x = im.value(n.input(0));
  HEDDLE_TRY(x);
  Ops& ops = im.ops();
  auto cell = read_cell(im, n, ops.shape(*x));
  HEDDLE_TRY(cell);
  const Cell& c = *cell;
  const int64_t h = c.hidden, g = c.gates;
  bool batch_major = attr_int(n, "layout", 0) != 0;
  auto w = optional_input(im, n, 1, IVec{c.dirs, g * h, c.input}, "W");
  HEDDLE_TRY(w);
  auto r = optional_input(im, n, 2, IVec{c.dirs, g * h, h}, "R");
  HEDDLE_TRY(r);
  auto b = optional_input(im, n, 3, IVec{c.dirs, 2 * g * h}, "B");
  HEDDLE_TRY(b);
  if (*w == kNoValue || *r == kNoValue) return im.error(n, "inputs W and R are required");
  if (n.input_size() > 4 && !n.input(4).empty()) {
    const Tensor* lens = im.constant(n.input(4));
    bool full = lens != nullptr && lens->is_int();
    for (int64_t i = 0; full && i < lens->numel(); ++i) full = lens->i64()[i] == c.seq;
    if (!full)
      return im.error(n, "'sequence_lens' must be a constant equal to the sequence length " +
                             std::to_string(c.seq) + " for every batch entry");
  }
  IVec state = batch_major ? IVec{c.batch, c.dirs, h} : IVec{c.dirs, c.batch, h};
  auto h0 = optional_input(im, n, 5, state, "initial_h");
  HEDDLE_TRY(h0);
  auto c0 =
      c.kind == "LSTM" ? optional_input(im, n, 6, state, "initial_c") : Result<ValueId>(kNoValue);
  HEDDLE_TRY(c0);
  if (n.input_size() > 7 && !n.input(7).empty())
    return im.error(n, "peephole weights (input P) are not supported");
  ValueId xs = batch_major ? ops.transpose(*x, {1, 0, 2}) : *x;  // [S, B, I]
  ValueId h0s = *h0 != kNoValue && batch_major ? ops.transpose(*h0, {1, 0, 2}) : *h0;
  ValueId c0s = *c0 != kNoValue && batch_major ? ops.transpose(*c0, {1, 0, 2}) : *c0;

  std::vector<ValueId> ys, yh, yc;  // per direction: [S, 1, B, H], [1, B, H], [1, B, H]
  for (int64_t d = 0; d < c.dirs; ++d) {
    const std::string* a = &c.acts[d * (c.acts.size() / c.dirs)];
    ValueId wd = row(ops, *w, d), rd = row(ops, *r, d);
    // The input projection of every step at once: [S, B, G*H], with the input bias (and, except
    // for GRU, whose recurrent bias sits inside the reset gate, the recurrent bias too).
    ValueId xp = ops.einsum("sbi,gi->sbg", xs, wd);
    ValueId rb = kNoValue;
    if (*b != kNoValue) {
      ValueId bd = row(ops, *b, d);
      ValueId wb = cut(ops, bd, 0, 0, g * h);
      rb = cut(ops, bd, 0, g * h, 2 * g * h);
      xp = ops.add(xp, c.kind == "GRU" ? wb : ops.add(wb, rb));
    }
    ValueId hs = h0s != kNoValue ? row(ops, h0s, d) : kNoValue;
    ValueId cs = c0s != kNoValue ? row(ops, c0s, d) : kNoValue;
    std::vector<ValueId> steps(static_cast<size_t>(c.seq));
    bool backward = c.reverse || d == 1;
    for (int64_t k = 0; k < c.seq; ++k) {
      int64_t t = backward ? c.seq - 1 - k : k;
      ValueId xt = row(ops, cut(ops, xp, 0, t, t + 1), 0);  // [B, G*H]
      if (hs == kNoValue) hs = ops.fill_like(gate(ops, xt, 0, h), 0.0);
      ValueId hr = ops.einsum("bh,gh->bg", hs, rd);  // [B, G*H]
      if (c.kind == "LSTM") {
        if (cs == kNoValue) cs = ops.fill_like(hs, 0.0);
        ValueId s = ops.add(xt, hr);
        ValueId i = act(ops, a[0], gate(ops, s, 0, h)), o = act(ops, a[0], gate(ops, s, 1, h));
        ValueId f = act(ops, a[0], gate(ops, s, 2, h)), z = act(ops, a[1], gate(ops, s, 3, h));
        cs = ops.add(ops.mul(f, cs), ops.mul(i, z));
        hs = ops.mul(o, act(ops, a[2], cs));
      } else if (c.kind == "GRU") {
        if (rb != kNoValue) hr = ops.add(hr, rb);
        ValueId zg = act(ops, a[0], ops.add(gate(ops, xt, 0, h), gate(ops, hr, 0, h)));
        ValueId rg = act(ops, a[0], ops.add(gate(ops, xt, 1, h), gate(ops, hr, 1, h)));
        ValueId cand;
        if (c.linear_before_reset) {
          cand = ops.mul(rg, gate(ops, hr, 2, h));
        } else {  // (r * H) R_h^T + Rb_h
          cand = ops.einsum("bh,gh->bg", ops.mul(rg, hs), cut(ops, rd, 0, 2 * h, 3 * h));
          if (rb != kNoValue) cand = ops.add(cand, cut(ops, rb, 0, 2 * h, 3 * h));
        }
        ValueId hn = act(ops, a[1], ops.add(gate(ops, xt, 2, h), cand));
        hs = ops.add(hn, ops.mul(zg, ops.sub(hs, hn)));  // (1 - z) * hn + z * H
      } else {
        hs = act(ops, a[0], ops.add(xt, hr));
      }
      steps[t] = ops.reshape(hs, {1, 1, c.batch, h});
      HEDDLE_TRY(im.check(n));
    }
    ys.push_back(c.seq == 1 ? steps[0] : ops.concat(steps, 0));
    yh.push_back(ops.reshape(hs, {1, c.batch, h}));
    if (c.kind == "LSTM") yc.push_back(ops.reshape(cs, {1, c.batch, h}));
  }
  auto join = [&](const std::vector<ValueId>& v, int64_t axis) {
    return v.size() == 1 ? v[0] : ops.concat(v, axis);
  };
  ValueId y = join(ys, 1), yhv = join(yh, 0);
  ValueId ycv = yc.empty() ? kNoValue : join(yc, 0);
  if (batch_major) {  // Y [B, S, D, H]; Y_h, Y_c [B, D, H]
    y = ops.transpose(y, {2, 0, 1, 3});
    yhv = ops.transpose(yhv, {1, 0, 2});
    if (ycv != kNoValue) ycv = ops.transpose(ycv, {1, 0, 2});
  }
  HEDDLE_TRY(im.check(n));
  std::vector<ValueId> outs = {y, yhv, ycv};
  for (int k = 0; k < n.output_size() && k < 3; ++k)
    if (!n.output(k).empty()) {
      if (outs[k] == kNoValue) return im.error(n, "has no output " + std::to_string(k));
      im.set_value(n.output(k), outs[k]);
    }
  return {};
}

}  // namespace

void register_recurrent_ops(std::map<std::string, NodeHandler>& t) {
  t["LSTM"] = recurrent;
  t["GRU"] = recurrent;
  t["RNN"] = recurrent;
}

}  // namespace heddle::onnx_detail
