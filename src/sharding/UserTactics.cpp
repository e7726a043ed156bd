#include "heddle/sharding/UserTactics.h"

#include <cctype>
#include <map>
#include <utility>

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

const char* kForms =
    "write %VALUE:DIM=AXIS (DIM a tensor dim, or an index dim of the op "
    "defining VALUE) or %VALUE=replicate";

// The names of `mesh`'s axes, for diagnostics.
std::string axis_names(const Mesh& mesh) {
  std::vector<std::string> names;
  for (const MeshAxis& a : mesh.axes()) names.push_back(a.name);
  return names.empty() ? "none (one device)" : join(names, ", ");
}

// One pinned (value or op, axis) and who pinned it.
template <typename T>
struct Pinned {
  T what;
  std::string source;
};

std::string placement_text(const Placement& p) { return p.to_string(); }
std::string split_text(const IndexSpace& space, int64_t i) {
  return i < 0 ? std::string("no split") : "a split of index dim " + space.dim(i).name;
}

}  // namespace

Result<Tactic> Tactic::parse(std::string_view text) {
  Tactic t;
  t.source = "--tactic '" + std::string(text) + "'";
  auto bad = [&](const std::string& why) {
    return Diagnostic(t.source + ": " + why + "; " + kForms);
  };
  size_t pos = 0;
  if (text.empty() || text[0] != '%') return bad("expected a value name starting with '%'");
  ++pos;
  if (pos < text.size() && text[pos] == '"') {
    size_t end = text.find('"', pos + 1);
    if (end == std::string_view::npos) return bad("unterminated quoted value name");
    t.value = std::string(text.substr(pos + 1, end - pos - 1));
    pos = end + 1;
  } else {
    size_t b = pos;
    while (pos < text.size() && is_name_char(text[pos])) ++pos;
    t.value = std::string(text.substr(b, pos - b));
  }
  if (t.value.empty()) return bad("the value name is empty");
  std::string dim;
  if (pos < text.size() && text[pos] == ':') {
    size_t b = ++pos;
    while (pos < text.size() && is_name_char(text[pos])) ++pos;
    dim = std::string(text.substr(b, pos - b));
    if (dim.empty()) return bad("expected a dim after ':'");
  }
  if (pos >= text.size() || text[pos] != '=') return bad("expected '=' and a mesh axis");
  std::string axis(text.substr(pos + 1));
  if (axis.empty()) return bad("expected a mesh axis (or 'replicate') after '='");
  for (char c : axis)
    if (!is_name_char(c)) return bad("mesh axis '" + axis + "' is not a name");
  if (dim.empty()) {
    if (axis != "replicate")
      return bad("'%" + t.value + "=" + axis + "' names no dim: did you mean %" + t.value +
                 ":0=" + axis + "?");
    t.kind = Kind::kReplicateValue;
    return t;
  }
  if (axis == "replicate")
    return bad("replicate applies to a whole value: write %" + t.value + "=replicate");
  t.axis = axis;
  if (std::isdigit(static_cast<unsigned char>(dim[0]))) {
    auto d = parse_int(dim);
    if (!d) return bad("tensor dim '" + dim + "' is not a number");
    t.kind = Kind::kShardValue;
    t.tensor_dim = *d;
  } else {
    t.kind = Kind::kSplitOp;
    t.index_dim = dim;
  }
  return t;
}

std::string Tactic::to_string() const {
  std::string v = value_ref(value);
  switch (kind) {
    case Kind::kShardValue:
      return v + ":" + std::to_string(tensor_dim) + "=" + axis;
    case Kind::kReplicateValue:
      return v + "=replicate";
    case Kind::kSplitOp:
      return v + ":" + index_dim + "=" + axis;
    case Kind::kReplicateOp:
      return v + ":op=replicate";
  }
  return v;
}

std::vector<Tactic> graph_tactics(const Graph& g) {
  std::vector<Tactic> out;
  auto where = [&](int32_t line) {
    return SourceLoc{g.source_file().empty() ? g.name() : g.source_file(), line, 0}.to_string();
  };
  auto add_value = [&](ValueId v) {
    const Value& val = g.value(v);
    const ShardAnnotation& a = val.tactic;
    if (a.replicate)
      out.push_back({Tactic::Kind::kReplicateValue, val.name, 0, "", "", where(a.line)});
    for (const AxisPin& p : a.pins)
      out.push_back({Tactic::Kind::kShardValue, val.name, p.dim, "", p.axis, where(a.line)});
  };
  for (ValueId v : g.inputs()) add_value(v);
  for (ValueId v : g.params()) add_value(v);
  for (const Op& op : g.ops()) {
    for (const auto& r : op.results) add_value(r.value);
    const ShardAnnotation& a = op.tactic;
    const std::string& name = g.value(op.results.at(0).value).name;
    if (a.replicate) out.push_back({Tactic::Kind::kReplicateOp, name, 0, "", "", where(a.line)});
    for (const AxisPin& p : a.pins)
      if (p.dim >= 0 && p.dim < op.space.rank())
        out.push_back(
            {Tactic::Kind::kSplitOp, name, 0, op.space.dim(p.dim).name, p.axis, where(a.line)});
  }
  return out;
}

Result<Pins> apply_tactics(const Graph& g, const Mesh& mesh, Pins pins,
                           const std::vector<Tactic>& tactics, std::string_view preset) {
  std::map<std::pair<ValueId, int64_t>, Pinned<Placement>> values;
  std::map<std::pair<OpId, int64_t>, Pinned<int64_t>> ops;
  const std::string preset_text = preset.empty() ? "the strategy" : std::string(preset);
  auto conflict = [&](const std::string& target, int64_t a, const std::string& x,
                      const std::string& xs, const std::string& y, const std::string& ys) {
    return Diagnostic("conflicting tactics for " + target + " on mesh axis " + mesh.axis(a).name +
                      ": " + x + " from " + xs + ", but " + y + " from " + ys);
  };
  for (const Tactic& t : tactics) {
    auto v = g.find_value(t.value);
    if (!v)
      return Diagnostic(t.source + ": " + value_ref(t.value) + " is not a value of " + g.name());
    const std::string vref = value_ref(t.value);
    const TensorType& type = g.type(*v);
    int64_t axis = -1;
    if (t.kind == Tactic::Kind::kShardValue || t.kind == Tactic::Kind::kSplitOp) {
      axis = mesh.find(t.axis);
      if (axis < 0)
        return Diagnostic(t.source + ": the mesh " + mesh.to_string() + " has no axis '" + t.axis +
                          "'; its axes: " + axis_names(mesh));
    }
    auto pin_value = [&](int64_t a, Placement p) -> Status {
      auto [it, fresh] = values.try_emplace({*v, a}, Pinned<Placement>{p, t.source});
      if (!fresh && it->second.what != p)
        return conflict(vref, a, placement_text(it->second.what), it->second.source,
                        placement_text(p), t.source);
      return {};
    };
    const OpId producer = g.value(*v).producer;
    auto pin_op = [&](int64_t a, int64_t i) -> Status {
      auto [it, fresh] = ops.try_emplace({producer, a}, Pinned<int64_t>{i, t.source});
      const IndexSpace& space = g.op(producer).space;
      if (!fresh && it->second.what != i)
        return conflict("the op defining " + vref, a, split_text(space, it->second.what),
                        it->second.source, split_text(space, i), t.source);
      return {};
    };
    switch (t.kind) {
      case Tactic::Kind::kShardValue:
        if (t.tensor_dim < 0 || t.tensor_dim >= type.rank())
          return Diagnostic(t.source + ": " + vref + " " + type.to_string() +
                            " has no tensor dim " + std::to_string(t.tensor_dim) + " (it has " +
                            std::to_string(type.rank()) + ")");
        HEDDLE_TRY(pin_value(axis, Placement::shard(t.tensor_dim)));
        break;
      case Tactic::Kind::kReplicateValue:
        for (int64_t a = 0; a < mesh.rank(); ++a) HEDDLE_TRY(pin_value(a, Placement::replicate()));
        break;
      case Tactic::Kind::kSplitOp:
      case Tactic::Kind::kReplicateOp: {
        if (producer == kNoOp)
          return Diagnostic(t.source + ": " + vref + " is a graph " +
                            std::string(value_role_name(g.value(*v).role)) +
                            ", which no op defines; pin its placement with " + vref +
                            ":TENSOR_DIM=AXIS");
        const IndexSpace& space = g.op(producer).space;
        if (t.kind == Tactic::Kind::kReplicateOp) {
          for (int64_t a = 0; a < mesh.rank(); ++a) HEDDLE_TRY(pin_op(a, -1));
          break;
        }
        int64_t i = 0;
        while (i < space.rank() && space.dim(i).name != t.index_dim) ++i;
        if (i == space.rank())
          return Diagnostic(t.source + ": the op defining " + vref + " has no index dim '" +
                            t.index_dim + "'; its index space: " + space.to_string() +
                            " (a digit names a tensor dim of the value instead)");
        HEDDLE_TRY(pin_op(axis, i));
        break;
      }
    }
  }
  // The preset's pins against the tactics: inputs' starting placements and fixed op strategies.
  for (const auto& [key, pin] : values) {
    auto it = pins.values.find(key.first);
    if (it != pins.values.end() && it->second.at(key.second) != pin.what)
      return conflict(value_ref(g.value(key.first).name), key.second,
                      placement_text(it->second.at(key.second)), preset_text,
                      placement_text(pin.what), pin.source);
  }
  for (const auto& [key, pin] : ops) {
    auto it = pins.ops.find(key.first);
    const IndexSpace& space = g.op(key.first).space;
    if (it != pins.ops.end() && it->second.dim(key.second) != pin.what)
      return conflict(
          "the op defining " + value_ref(g.value(g.op(key.first).results[0].value).name),
          key.second, split_text(space, it->second.dim(key.second)), preset_text,
          split_text(space, pin.what), pin.source);
  }
  for (const auto& [key, pin] : ops) pins.op_axes[key.first][key.second] = pin.what;
  for (const auto& [key, pin] : values) pins.value_axes[key.first][key.second] = pin.what;
  // Each op's pinned axes on their own, and its results' pins on the same axes: the projections
  // must take them (derive_placements says why not).
  for (const auto& [id, axes] : pins.op_axes) {
    std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
    for (auto [a, i] : axes) dims[a] = i;
    auto p = derive_placements(g, id, mesh, OpStrategy(dims));
    const Op& op = g.op(id);
    if (!p.ok()) {
      std::vector<std::string> sources;
      for (auto [a, i] : axes) sources.push_back(ops.at({id, a}).source);
      return Diagnostic(join(sources, ", ") + ": " + p.error().message);
    }
    for (size_t k = 0; k < op.results.size(); ++k) {
      auto it = pins.value_axes.find(op.results[k].value);
      if (it == pins.value_axes.end()) continue;
      for (auto [a, i] : axes) {
        auto want = it->second.find(a);
        if (want == it->second.end() || p->results[k].sharding.at(a) == want->second) continue;
        const Pinned<Placement>& vp = values.at({op.results[k].value, a});
        return conflict(
            value_ref(g.value(op.results[k].value).name), a,
            split_text(op.space, i) + " gives " + placement_text(p->results[k].sharding.at(a)),
            ops.at({id, a}).source, placement_text(want->second), vp.source);
      }
    }
  }
  // A result's pinned shard must be one its producer can give: some index dim reaching it.
  for (const auto& [key, pin] : values) {
    auto [v, a] = key;
    const OpId id = g.value(v).producer;
    if (id == kNoOp || !pin.what.is_shard() || pins.op_axes.count(id)) continue;
    const Op& op = g.op(id);
    const int k = g.value(v).result_index;
    std::vector<std::string> why;
    bool ok = false;
    for (int64_t i = 0; i < op.space.rank() && !ok; ++i) {
      std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
      dims[a] = i;
      auto p = derive_placements(g, id, mesh, OpStrategy(dims));
      if (p.ok() && p->results[k].sharding.at(a) == pin.what) ok = true;
      if (!p.ok() && op.results[k].proj.map().at(pin.what.dim(), i) != 0)
        why.push_back(p.error().message);
    }
    if (!ok)
      return Diagnostic(
          pin.source + ": no split on mesh axis " + mesh.axis(a).name + " of op '" +
          std::string(op_kind_name(op.kind)) + "' gives " + value_ref(g.value(v).name) + " " +
          pin.what.to_string() + ": " +
          (why.empty() ? "no index dim of the op reaches that tensor dim" : join(why, "; ")));
  }
  return pins;
}

}  // namespace heddle
