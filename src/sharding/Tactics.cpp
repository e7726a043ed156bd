#include "heddle/sharding/Tactics.h"

#include <algorithm>

#include "heddle/ir/TextPrinter.h"
#include "heddle/sharding/SplitReport.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

// Context parallelism: the `cp` axis splits only sequence dims, starting from dim 1 (the
// sequence) of every graph input of rank >= 2, on top of the batch split the inputs already have.
// Diagnostics: a graph whose attention mixes no sequence (no value with a query and a key
// sequence dim), a sequence the cp degree does not divide.
Status pin_sequence(const Graph& g, const Mesh& mesh, int64_t cp, Pins& pins) {
  const int64_t n = mesh.size(cp);
  const std::string degree = "cp=" + std::to_string(n);
  DimLabels labels = label_dims(g, pins.activation_params);
  bool attention = false;
  for (const auto& dims : labels.sequence)
    attention |= std::count(dims.begin(), dims.end(), true) >= 2;
  if (!attention)
    return Diagnostic(degree + " splits the sequence over devices, but " + g.name() +
                      " has no sequence dim that attention mixes (no value with a query and a key "
                      "sequence dim); use it on a transformer (gpt, llama, moe zoo models)");
  pins.axis_roles[cp] = AxisRole::kSequence;
  for (ValueId v : g.inputs()) {
    const TensorType& t = g.type(v);
    if (t.rank() < 2) continue;
    if (t.shape()[1] % n != 0)
      return Diagnostic(degree + " does not divide the sequence " + std::to_string(t.shape()[1]) +
                        " of input " + value_ref(g.value(v).name) + " " + t.to_string() +
                        "; divisors of " + std::to_string(t.shape()[1]) + ": " +
                        divisors_text(t.shape()[1]));
    auto it = pins.values.find(v);
    TensorSharding s =
        it != pins.values.end() ? it->second : TensorSharding::replicated(mesh.rank());
    pins.values[v] = s.with(cp, Placement::shard(1));
  }
  return {};
}

}  // namespace

Result<Pins> tactic_pins(const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                         const std::set<ValueId>& activation_params) {
  Pins pins;
  pins.activation_params = activation_params;
  pins.axis_roles.assign(static_cast<size_t>(mesh.rank()), AxisRole::kAny);
  int64_t dp = mesh.find("dp"), tp = mesh.find("tp"), ep = mesh.find("ep"), cp = mesh.find("cp");
  if (mesh.find("pp") >= 0)
    return Diagnostic(
        "pipeline parallelism (pp) splits the model into stages, each planned on its own mesh "
        "(heddle run and heddle simulate do that); one sharding plan has no pp axis");
  if (dp >= 0) pins.axis_roles[dp] = AxisRole::kBatch;
  if (ep >= 0) {
    pins.axis_roles[ep] = AxisRole::kBatchOrExpert;
    bool experts = false;
    for (ValueId v : g.params())
      experts |= g.type(v).rank() >= 3 && g.type(v).shape()[0] % mesh.size(ep) == 0;
    if (!experts)
      return Diagnostic("ep=" + std::to_string(mesh.size(ep)) +
                        " needs stacked expert weights "
                        "(parameters [experts, ...]) whose expert count it divides; " +
                        g.name() + " has none");
  }
  if (tp >= 0) pins.axis_roles[tp] = spec.sp ? AxisRole::kModelOrSequence : AxisRole::kModel;
  if (ep >= 0)  // outside the experts the ep axis splits tokens, like data parallelism
    for (ValueId v : g.inputs()) {
      const TensorType& t = g.type(v);
      int64_t n = mesh.size(ep) * (dp >= 0 ? mesh.size(dp) : 1);
      if (t.rank() == 0 || t.shape()[0] % n != 0) continue;
      TensorSharding s = TensorSharding::replicated(mesh.rank()).with(ep, Placement::shard(0));
      if (dp >= 0) s = s.with(dp, Placement::shard(0));
      pins.values[v] = s;
    }
  if (dp >= 0 && mesh.size(dp) > 1) {
    for (ValueId v : g.inputs()) {
      const TensorType& t = g.type(v);
      if (t.rank() == 0 || pins.values.count(v)) continue;
      if (t.shape()[0] % mesh.size(dp) != 0)
        return Diagnostic("dp=" + std::to_string(mesh.size(dp)) + " does not divide the batch " +
                          std::to_string(t.shape()[0]) + " of input " + value_ref(g.value(v).name) +
                          " " + t.to_string() + "; divisors of " + std::to_string(t.shape()[0]) +
                          ": " + divisors_text(t.shape()[0]));
      pins.values[v] = TensorSharding::replicated(mesh.rank()).with(dp, Placement::shard(0));
    }
    int64_t zero = spec.zero.value_or(0);
    if (zero >= 3)
      for (ValueId v : g.params()) {
        const TensorType& t = g.type(v);
        if (t.rank() == 0 || t.shape()[0] % mesh.size(dp) != 0) continue;  // small: replicate
        pins.values[v] = TensorSharding::replicated(mesh.rank()).with(dp, Placement::shard(0));
      }
    if (zero >= 1)
      for (OpId i = 0; i < g.num_ops(); ++i) {
        const Op& op = g.op(i);
        if (op_kind_info(op.kind).category != OpCategory::kOptimizer) continue;
        // The update is elementwise over the parameter: split its first index dim on dp when
        // dp divides it, so each rank updates (and keeps optimizer state for) one slice.
        std::vector<int64_t> dims(static_cast<size_t>(mesh.rank()), -1);
        if (op.space.rank() == 0 || op.space.dim(0).extent % mesh.size(dp) != 0) continue;
        dims[dp] = 0;
        if (tp >= 0) {  // keep the tensor-parallel split the parameter already has
          auto p = derive_placements(g, i, mesh, OpStrategy(dims));
          if (!p.ok()) continue;
        }
        pins.ops[i] = OpStrategy(dims);
      }
  }
  if (cp >= 0 && mesh.size(cp) > 1) HEDDLE_TRY(pin_sequence(g, mesh, cp, pins));
  return pins;
}

Result<Propagation> plan_from_strategy(const Graph& g, const Mesh& mesh, const StrategySpec& spec,
                                       const PropagateOptions& options) {
  auto pins = tactic_pins(g, mesh, spec);
  HEDDLE_TRY(pins);
  auto p = plan_from_pins(g, mesh, *pins, options);
  if (p.ok() && spec.ring_cp()) p->plan.ring_axis = mesh.find("cp");
  return p;
}

Result<Propagation> plan_from_pins(const Graph& g, const Mesh& mesh, const Pins& pins,
                                   const PropagateOptions& options) {
  auto p = propagate(g, mesh, pins, options);
  HEDDLE_TRY(p);
  // An axis that splits nothing: say why, op by op (split_report), not a guess. The search
  // plans many strategies: the report is made only for one that fails.
  bool idle = false;
  for (int64_t a = 0; a < mesh.rank(); ++a) {
    bool used = mesh.size(a) == 1;
    for (const auto& s : p->plan.ops) used |= s.dim(a) >= 0;
    idle |= !used;
  }
  if (!idle) return p;
  SplitReport report = split_report(g, pins, p->plan);
  if (report.idle_axes.empty()) return p;
  const int64_t a = report.idle_axes.front();
  bool divisibility = true;  // every dim refused for its extent: show divisors
  std::vector<std::string> examples;
  for (const UnsplitOp& u : report.unsplit) {
    if (u.axis != a) continue;
    for (const DimVerdict& d : u.dims) divisibility &= d.reason == NoSplit::kDivisibility;
    if (examples.size() < 2) examples.push_back(unsplit_text(g, mesh, u));
  }
  std::string head = mesh.axis(a).name + "=" + std::to_string(mesh.size(a)) + " splits no op of " +
                     g.name() + ": ";
  if (!divisibility) return Diagnostic(head + "not for divisibility: " + join(examples, "; and "));
  std::vector<int64_t> extents;  // the parameters' dims: where model parallelism cuts
  for (ValueId v : g.params())
    for (int64_t d : g.type(v).shape())
      if (d > 1 && std::find(extents.begin(), extents.end(), d) == extents.end())
        extents.push_back(d);
  std::sort(extents.rbegin(), extents.rend());
  std::string hint;
  for (size_t k = 0; k < extents.size() && k < 3; ++k)
    hint += (k ? "; " : "") + std::to_string(extents[k]) + ": " + divisors_text(extents[k]);
  return Diagnostic(
      head + "it divides none of the dims it may split" +
      (hint.empty() ? std::string() : " (divisors of the largest parameter dims: " + hint + ")") +
      (examples.empty() ? std::string() : "; " + examples.front()));
}

}  // namespace heddle
