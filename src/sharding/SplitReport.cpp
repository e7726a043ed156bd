#include "heddle/sharding/SplitReport.h"

#include <map>

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

// The rule an axis role applies, for a sentence.
std::string role_rule(AxisRole r) {
  switch (r) {
    case AxisRole::kAny:
      return "any dim";
    case AxisRole::kBatch:
      return "only dims derived from the batch (dim 0) of the graph inputs";
    case AxisRole::kModel:
      return "only model dims: neither the batch (dim 0) nor the sequence (dim 1) of the graph "
             "inputs";
    case AxisRole::kModelOrSequence:
      return "only model dims, and sequence dims outside contractions";
    case AxisRole::kBatchOrExpert:
      return "only batch and expert dims";
    case AxisRole::kSequence:
      return "only dims derived from the sequence (dim 1) of the graph inputs";
  }
  return "";
}

}  // namespace

std::string_view no_split_name(NoSplit r) {
  switch (r) {
    case NoSplit::kDivisibility:
      return "divisibility";
    case NoSplit::kForm:
      return "form";
    case NoSplit::kRole:
      return "role";
    case NoSplit::kTactic:
      return "tactic";
    case NoSplit::kCost:
      return "cost";
  }
  return "";
}

bool UnsplitOp::could_split() const {
  for (const DimVerdict& d : dims)
    if (d.reason != NoSplit::kDivisibility && d.reason != NoSplit::kForm) return true;
  return false;
}

std::string unsplit_text(const Graph& g, const Mesh& mesh, const UnsplitOp& u) {
  const Op& op = g.op(u.op);
  std::string s = "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
                  value_ref(g.value(op.results[0].value).name) + " " + op.space.to_string() +
                  " not split on " + mesh.axis(u.axis).name + "=" +
                  std::to_string(mesh.size(u.axis)) + ":";
  for (size_t k = 0; k < u.dims.size(); ++k)
    s += (k ? "; " : " ") + op.space.dim(u.dims[k].dim).name + " (" +
         std::string(no_split_name(u.dims[k].reason)) + "): " + u.dims[k].detail;
  return s;
}

std::string SplitReport::to_string(const Graph& g, const Mesh& mesh, size_t limit) const {
  std::string s;
  for (int64_t a : idle_axes)
    s += "mesh axis " + mesh.axis(a).name + "=" + std::to_string(mesh.size(a)) + " splits no op\n";
  if (unsplit.empty()) return s;
  // Per axis, how many ops it leaves whole, by the reason of their most hopeful dim.
  std::map<int64_t, std::map<std::string, int64_t>> counts;
  for (const UnsplitOp& u : unsplit) {
    NoSplit best = NoSplit::kDivisibility;
    for (const DimVerdict& d : u.dims) best = std::max(best, d.reason);
    ++counts[u.axis][std::string(no_split_name(best))];
  }
  for (const auto& [a, by] : counts) {
    int64_t n = 0;
    std::vector<std::string> parts;
    for (const auto& [why, k] : by) {
      n += k;
      parts.push_back(why + " " + std::to_string(k));
    }
    s += std::to_string(n) + " of " + std::to_string(g.num_ops()) + " ops not split on " +
         mesh.axis(a).name + "=" + std::to_string(mesh.size(a)) + " (" + join(parts, ", ") + ")\n";
  }
  for (size_t k = 0; k < unsplit.size() && k < limit; ++k)
    s += "  " + unsplit_text(g, mesh, unsplit[k]) + "\n";
  if (unsplit.size() > limit)
    s += "  ... " + std::to_string(unsplit.size() - limit) + " more (--json lists them all)\n";
  return s;
}

SplitReport split_report(const Graph& g, const Pins& pins, const ShardingPlan& plan) {
  const Mesh& mesh = plan.mesh;
  SplitReport out;
  DimLabels labels = label_dims(g, pins.activation_params);
  std::vector<bool> used(static_cast<size_t>(mesh.rank()), false);
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    const OpStrategy& s = plan.ops.at(static_cast<size_t>(id));
    bool whole = true;
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      if (s.dim(a) < 0) continue;
      used[a] = true;
      whole = false;
    }
    bool splittable = false;
    for (const IndexDim& d : op.space.dims()) splittable |= d.extent > 1;
    if (!splittable) continue;
    bool any_axis = false;
    // derive_placements' sentences start by naming the op, which the report names already.
    const std::string who = "op '" + std::string(op_kind_name(op.kind)) + "' defining " +
                            value_ref(g.value(op.results[0].value).name) + ": ";
    for (int64_t a = 0; a < mesh.rank(); ++a) {
      if (mesh.size(a) == 1 || s.dim(a) >= 0) continue;
      any_axis = true;
      UnsplitOp u{id, a, {}};
      const auto op_pin = pins.op_axes.find(id);
      const bool pinned =
          pins.ops.count(id) || (op_pin != pins.op_axes.end() && op_pin->second.count(a));
      for (int64_t i = 0; i < op.space.rank(); ++i) {
        const IndexDim& d = op.space.dim(i);
        if (d.extent <= 1) continue;
        std::vector<int64_t> dims = s.dims();
        dims[a] = i;
        int64_t n = 1;
        for (int64_t b = 0; b < mesh.rank(); ++b)
          if (dims[b] == i) n *= mesh.size(b);
        auto p = derive_placements(g, id, mesh, OpStrategy(dims));
        DimVerdict v{i, NoSplit::kCost, ""};
        if (!p.ok()) {
          v.reason = d.extent % n != 0 ? NoSplit::kDivisibility : NoSplit::kForm;
          v.detail = p.error().message;
          if (v.detail.compare(0, who.size(), who) == 0) v.detail.erase(0, who.size());
        } else if (pinned) {
          v.reason = NoSplit::kTactic;
          v.detail = "valid, but a tactic fixes this op's split on " + mesh.axis(a).name;
        } else if (!strategy_allowed(g, id, mesh, pins, labels, OpStrategy(dims))) {
          v.reason = NoSplit::kRole;
          AxisRole r = a < static_cast<int64_t>(pins.axis_roles.size()) ? pins.axis_roles[a]
                                                                        : AxisRole::kAny;
          v.detail = "valid, but " + mesh.axis(a).name + " may split " + role_rule(r) +
                     " (pin it with --tactic)";
        } else {
          v.detail =
              "valid; the planner estimated the unsplit op cheaper (the reshards it needs "
              "cost more than the compute it saves)";
        }
        u.dims.push_back(std::move(v));
      }
      out.unsplit.push_back(std::move(u));
    }
    out.replicated_ops += whole && any_axis;
  }
  for (int64_t a = 0; a < mesh.rank(); ++a)
    if (mesh.size(a) > 1 && !used[a]) out.idle_axes.push_back(a);
  return out;
}

}  // namespace heddle
