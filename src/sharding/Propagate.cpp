#include "heddle/sharding/Propagate.h"

#include <map>
#include <optional>
#include <tuple>

#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/sharding/Reshard.h"

namespace heddle {

namespace {

// The index dims of `op` that reach a labelled dim of an input through a single-row column.
std::vector<bool> index_labels(const Graph& g, const Op& op,
                               const std::vector<std::vector<bool>>& labels) {
  std::vector<bool> out(static_cast<size_t>(op.space.rank()), false);
  for (const auto& in : op.inputs) {
    const AffineMap& m = in.proj.map();
    for (int64_t i = 0; i < op.space.rank(); ++i)
      for (int64_t r = 0; r < m.out_rank(); ++r)
        if (m.at(r, i) != 0 && labels[in.value][r]) out[i] = true;
  }
  (void)g;
  return out;
}

void label_results(const Op& op, const std::vector<bool>& idx,
                   std::vector<std::vector<bool>>& labels) {
  for (const auto& r : op.results) {
    const AffineMap& m = r.proj.map();
    for (int64_t row = 0; row < m.out_rank(); ++row)
      for (int64_t i = 0; i < op.space.rank(); ++i)
        if (m.at(row, i) != 0 && idx[i]) labels[r.value][row] = true;
  }
}

// Per mesh axis and value, the tensor dims the tactics shard on that axis (pinned values, and
// results of ops pinned to split there), flowed forward through projections as label_dims()
// flows batch dims.
std::vector<std::vector<std::vector<bool>>> tactic_labels(const Graph& g, const Mesh& mesh,
                                                          const Pins& pins) {
  std::vector<std::vector<std::vector<bool>>> out;
  if (pins.value_axes.empty() && pins.op_axes.empty()) return out;
  out.resize(static_cast<size_t>(mesh.rank()));
  for (auto& per_value : out)
    for (const Value& v : g.values()) per_value.emplace_back(static_cast<size_t>(v.type.rank()));
  for (const auto& [v, axes] : pins.value_axes)
    for (const auto& [a, p] : axes)
      if (p.is_shard() && p.dim() < g.type(v).rank()) out[a][v][p.dim()] = true;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    auto pinned = pins.op_axes.find(id);
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      std::vector<bool> idx = index_labels(g, op, out[a]);
      if (pinned != pins.op_axes.end())
        if (auto it = pinned->second.find(a); it != pinned->second.end() && it->second >= 0)
          idx[it->second] = true;
      label_results(op, idx, out[a]);
    }
  }
  return out;
}

}  // namespace

double parallelism(const IndexSpace& space, const Mesh& mesh, const OpStrategy& s) {
  double p = 1;
  for (int64_t i = 0; i < space.rank(); ++i) {
    int64_t n = 1;
    for (int64_t a = 0; a < mesh.rank(); ++a)
      if (s.dim(a) == i) n *= mesh.size(a);
    int64_t e = space.dim(i).extent;
    if (n > 1 && e > 0) p *= static_cast<double>(e) / static_cast<double>((e + n - 1) / n);
  }
  return p;
}

bool strategy_allowed(const Graph& g, OpId id, const Mesh& mesh, const Pins& pins,
                      const DimLabels& labels, const OpStrategy& s) {
  const Op& op = g.op(id);
  std::vector<bool> batch = index_labels(g, op, labels.batch);
  std::vector<bool> seq = index_labels(g, op, labels.sequence);
  std::vector<bool> expert = index_labels(g, op, labels.expert);
  bool contraction = op_kind_info(op.kind).category == OpCategory::kContraction;
  for (int64_t a = 0; a < mesh.rank(); ++a) {
    int64_t i = s.dim(a);
    if (i < 0 || a >= static_cast<int64_t>(pins.axis_roles.size())) continue;
    switch (pins.axis_roles[a]) {
      case AxisRole::kAny:
        break;
      case AxisRole::kBatch:
        if (!batch[i]) return false;
        break;
      case AxisRole::kModel:
        if (batch[i] || seq[i]) return false;
        break;
      case AxisRole::kModelOrSequence:
        if (batch[i] || (seq[i] && contraction)) return false;
        break;
      case AxisRole::kBatchOrExpert:
        if (!batch[i] && !expert[i]) return false;
        break;
      case AxisRole::kSequence:
        if (!seq[i]) return false;
        break;
    }
  }
  return true;
}

DimLabels label_dims(const Graph& g, const std::set<ValueId>& as_inputs) {
  DimLabels l;
  for (const Value& v : g.values()) {
    l.batch.emplace_back(static_cast<size_t>(v.type.rank()), false);
    l.sequence.emplace_back(static_cast<size_t>(v.type.rank()), false);
    l.expert.emplace_back(static_cast<size_t>(v.type.rank()), false);
  }
  for (ValueId v : g.params())
    if (g.type(v).rank() >= 3 && !as_inputs.count(v)) l.expert[v][0] = true;
  std::vector<ValueId> inputs = g.inputs();
  inputs.insert(inputs.end(), as_inputs.begin(), as_inputs.end());
  for (ValueId v : inputs) {
    if (g.type(v).rank() >= 1) l.batch[v][0] = true;
    if (g.type(v).rank() >= 2) l.sequence[v][1] = true;
  }
  for (const Op& op : g.ops()) {
    label_results(op, index_labels(g, op, l.batch), l.batch);
    label_results(op, index_labels(g, op, l.sequence), l.sequence);
    label_results(op, index_labels(g, op, l.expert), l.expert);
  }
  return l;
}

PinnedChoices::PinnedChoices(const Graph& g, const Mesh& mesh, const Pins& pins)
    : g_(g),
      mesh_(mesh),
      pins_(pins),
      labels_(label_dims(g, pins.activation_params)),
      tactic_dims_(tactic_labels(g, mesh, pins)) {}

bool PinnedChoices::allowed(OpId id, const OpStrategy& s) const {
  const auto op_pin = pins_.op_axes.find(id);
  const bool pinned = op_pin != pins_.op_axes.end();
  if (pinned)
    for (auto [a, i] : op_pin->second)
      if (s.dim(a) != i) return false;
  // On an axis a tactic pins for this op, or whose tactic shards reach the dim it splits, the
  // axis role does not apply: the user decided.
  std::vector<int64_t> dims = s.dims();
  for (int64_t a = 0; a < mesh_.rank(); ++a) {
    if (dims[a] < 0) continue;
    if ((pinned && op_pin->second.count(a)) ||
        (!tactic_dims_.empty() && index_labels(g_, g_.op(id), tactic_dims_[a])[dims[a]]))
      dims[a] = -1;
  }
  return strategy_allowed(g_, id, mesh_, pins_, labels_, OpStrategy(dims));
}

bool PinnedChoices::results_agree(OpId id, const StrategyPlacements& p) const {
  const Op& op = g_.op(id);
  for (size_t k = 0; k < op.results.size(); ++k)
    if (auto it = pins_.value_axes.find(op.results[k].value); it != pins_.value_axes.end())
      for (const auto& [a, want] : it->second)
        if (p.results[k].sharding.at(a) != want) return false;
  return true;
}

bool PinnedChoices::constrained(OpId id) const {
  if (pins_.op_axes.count(id)) return true;
  for (const auto& r : g_.op(id).results)
    if (pins_.value_axes.count(r.value)) return true;
  return false;
}

Diagnostic PinnedChoices::unsatisfiable(OpId id) const {
  const Op& op = g_.op(id);
  return Diagnostic("no strategy of op '" + std::string(op_kind_name(op.kind)) + "' defining " +
                    value_ref(g_.value(op.results[0].value).name) + " on mesh " +
                    mesh_.to_string() + " satisfies every tactic on it and its results");
}

std::map<ValueId, TensorSharding> PinnedChoices::starts() const {
  std::map<ValueId, TensorSharding> out = pins_.values;
  for (const auto& [v, axes] : pins_.value_axes) {
    if (g_.value(v).role == ValueRole::kResult) continue;
    auto [it, fresh] = out.try_emplace(v, TensorSharding::replicated(mesh_.rank()));
    for (const auto& [a, p] : axes) it->second = it->second.with(a, p);
  }
  return out;
}

std::string Propagation::report(const Graph& g) const {
  std::string s;
  for (const auto& r : reshards) {
    const Op& op = g.op(r.consumer);
    s += value_ref(g.value(r.value).name) + ": " + r.from.to_string() + " -> " + r.to.to_string() +
         " for op '" + std::string(op_kind_name(op.kind)) + "' defining " +
         value_ref(g.value(op.results[0].value).name) + "\n";
  }
  return s;
}

Result<Propagation> propagate(const Graph& g, const Mesh& mesh, const Pins& pins,
                              const PropagateOptions& o) {
  BytesMovedCost bytes_cost;
  const CommCost& cost = o.cost ? *o.cost : bytes_cost;
  for (const auto& [v, s] : pins.values)
    if (s.rank() != mesh.rank() || v < 0 || v >= g.num_values())
      return Diagnostic("pinned placement " + s.to_string() + " does not fit mesh " +
                        mesh.to_string());
  const PinnedChoices choices(g, mesh, pins);
  Propagation out;
  out.plan = ShardingPlan::replicated(g, mesh);
  out.plan.pinned = choices.starts();  // tactics on inputs and parameters: the start
  std::vector<std::optional<TensorSharding>> current(static_cast<size_t>(g.num_values()));
  for (const auto& [v, s] : out.plan.pinned) current[v] = s;

  // A model's layers repeat, so the same (type, from, to) is priced many times: search once.
  std::map<std::tuple<IVec, DType, TensorSharding, TensorSharding>, std::optional<double>> priced;
  auto reshard_seconds = [&](ValueId v, const TensorSharding& from,
                             const TensorSharding& to) -> std::optional<double> {
    if (from == to) return 0.0;
    const TensorType& t = g.type(v);
    auto [it, fresh] = priced.try_emplace({t.shape(), t.dtype(), from, to});
    if (fresh) {
      auto plan = plan_reshard(t, mesh, from, to, cost);
      if (plan.ok()) it->second = cost.in_seconds() ? plan->cost : plan->cost * o.seconds_per_byte;
    }
    return it->second;
  };

  // The cheapest way to turn partial placements into plain ones: replicate them, or scatter them
  // along one tensor dim.
  auto settle_seconds = [&](ValueId v, const TensorSharding& s) {
    if (!s.has_partial()) return 0.0;
    std::optional<double> best;
    for (int64_t d = -1; d < g.type(v).rank(); ++d) {
      TensorSharding t = s;
      for (int64_t a = 0; a < mesh.rank(); ++a)
        if (t.at(a).is_partial())
          t = t.with(a, d < 0 ? Placement::replicate() : Placement::shard(d));
      auto c = reshard_seconds(v, s, t);
      if (c && (!best || *c < *best)) best = c;
    }
    return best.value_or(0);
  };

  // Fetching the halos of one input: per sharded tensor dim, the halo rows times the rest of the
  // local block, sent point to point.
  auto halo_seconds = [&](ValueId v, const OperandSharding& os) {
    if (!os.has_halo()) return 0.0;
    const TensorType& t = g.type(v);
    IVec local = os.sharding.local_shape(t.shape(), mesh);
    double secs = 0;
    for (int64_t d = 0; d < t.rank(); ++d) {
      int64_t rows = os.halo_lo[d] + os.halo_hi[d];
      if (rows == 0) continue;
      double bytes = static_cast<double>(local.with(d, rows).product()) *
                     static_cast<double>(dtype_bytes(t.dtype()));
      std::vector<int64_t> axes = os.sharding.axes_sharding(d);
      int64_t axis = axes.empty() ? 0 : axes.back();
      double c = cost.cost(Collective::kHaloExchange, axis, mesh.size(axis), bytes);
      secs += cost.in_seconds() ? c : c * o.seconds_per_byte;
    }
    return secs;
  };

  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    std::vector<OpStrategy> candidates;
    if (auto pin = pins.ops.find(id); pin != pins.ops.end()) {
      auto p = derive_placements(g, id, mesh, pin->second, o.shard_check);
      HEDDLE_TRY(p);
      candidates.push_back(pin->second);
    } else {
      for (auto& s : enumerate_strategies(g, id, mesh, o.shard_check))
        if (choices.allowed(id, s)) candidates.push_back(std::move(s));
      if (candidates.empty() && !choices.constrained(id))
        candidates.push_back(OpStrategy::replicated(mesh.rank()));
    }
    double flops = op_flops(g, id);
    std::optional<double> best;
    int best_moves = 0;
    OpStrategy chosen;
    for (const OpStrategy& s : candidates) {
      auto p = derive_placements(g, id, mesh, s, o.shard_check);
      if (!p.ok() || !choices.results_agree(id, *p)) continue;
      double t = flops / parallelism(op.space, mesh, s) * o.seconds_per_flop;
      int moves = 0;  // inputs that must be resharded first
      bool feasible = true;
      for (size_t k = 0; k < op.inputs.size() && feasible; ++k) {
        ValueId v = op.inputs[k].value;
        if (!current[v]) continue;  // first use: loaded where wanted, for free
        auto r = reshard_seconds(v, *current[v], p->inputs[k].sharding);
        if (!r) {
          feasible = false;
        } else {
          t += *r;
          moves += *current[v] != p->inputs[k].sharding;
        }
      }
      for (size_t k = 0; k < op.inputs.size(); ++k)  // halos fetched from their owners
        t += halo_seconds(op.inputs[k].value, p->inputs[k]);
      for (size_t k = 0; k < p->results.size(); ++k)  // partial results must be settled later
        t += settle_seconds(op.results[k].value, p->results[k].sharding);
      // Equal estimates: prefer computing where the data already is (a consumer may settle a
      // partial result more cheaply than an input reshard that is certain now).
      bool better =
          !best || t < *best * (1 - 1e-9) || (t <= *best * (1 + 1e-9) && moves < best_moves);
      if (feasible && better) {
        best = t;
        best_moves = moves;
        chosen = s;
      }
    }
    if (!best && choices.constrained(id)) return choices.unsatisfiable(id);
    if (!best) chosen = OpStrategy::replicated(mesh.rank());
    out.plan.ops[id] = chosen;
    auto p = derive_placements(g, id, mesh, chosen, o.shard_check);
    HEDDLE_TRY(p);
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      ValueId v = op.inputs[k].value;
      const TensorSharding& want = p->inputs[k].sharding;
      if (current[v] && *current[v] != want) {
        double secs = reshard_seconds(v, *current[v], want).value_or(0);
        out.reshards.push_back({v, id, *current[v], want, secs});
      }
      current[v] = want;
    }
    for (size_t k = 0; k < op.results.size(); ++k)
      current[op.results[k].value] = p->results[k].sharding;
  }
  return out;
}

}  // namespace heddle
