#include "heddle/sharding/Reshard.h"

#include <map>
#include <set>
#include <tuple>

#include "heddle/support/Strings.h"

namespace heddle {

namespace {

double local_bytes(const TensorType& t, const Mesh& mesh, const TensorSharding& s) {
  return static_cast<double>(s.local_shape(t.shape(), mesh).product()) *
         static_cast<double>(dtype_bytes(t.dtype()));
}

// True when no axis after `a` shards dim `d` in `s`: `a` is the most minor one for d.
bool minor_most(const TensorSharding& s, int64_t a, int64_t d) {
  for (int64_t b = a + 1; b < s.rank(); ++b)
    if (s.at(b).is_shard() && s.at(b).dim() == d) return false;
  return true;
}

}  // namespace

std::string ReshardStep::to_string(const Mesh& mesh) const {
  return std::string(collective_name(op)) + "(" + mesh.axis(axis).name + "): " + from.to_string() +
         " -> " + to.to_string();
}

std::string ReshardPlan::to_string(const Mesh& mesh) const {
  if (steps.empty()) return "(no communication)";
  std::vector<std::string> parts;
  for (const auto& s : steps) parts.push_back(s.to_string(mesh));
  return join(parts, "; ");
}

std::vector<ReshardStep> reshard_steps(const TensorType& type, const Mesh& mesh,
                                       const TensorSharding& s, const CommCost& cost) {
  HEDDLE_ASSERT(s.rank() == mesh.rank()) << s.to_string() << " on " << mesh.to_string();
  std::vector<ReshardStep> out;
  auto add = [&](Collective c, int64_t a, TensorSharding to, double bytes) {
    out.push_back({c, a, s, to, bytes, cost.cost(c, a, mesh.size(a), bytes)});
  };
  for (int64_t a = 0; a < mesh.rank(); ++a) {
    if (mesh.size(a) == 1) continue;
    const Placement& p = s.at(a);
    if (p.is_shard() && !minor_most(s, a, p.dim())) continue;
    auto shard_targets = [&](Collective c, double bytes_of_from) {
      for (int64_t e = 0; e < type.rank(); ++e) {
        if (p.is_shard() && p.dim() == e) continue;
        TensorSharding to = s.with(a, Placement::shard(e));
        if (!minor_most(to, a, e) || !to.blocks_nest(type.shape(), mesh)) continue;
        add(c, a, to, bytes_of_from);
      }
    };
    if (p.is_shard()) {
      TensorSharding to = s.with(a, Placement::replicate());
      add(Collective::kAllGather, a, to, local_bytes(type, mesh, to));
      shard_targets(Collective::kAllToAll, local_bytes(type, mesh, s));
    } else if (p.is_partial()) {
      add(Collective::kAllReduce, a, s.with(a, Placement::replicate()), local_bytes(type, mesh, s));
      shard_targets(Collective::kReduceScatter, local_bytes(type, mesh, s));
    } else {
      shard_targets(Collective::kSlice, local_bytes(type, mesh, s));
    }
  }
  return out;
}

Result<ReshardPlan> plan_reshard(const TensorType& type, const Mesh& mesh,
                                 const TensorSharding& from, const TensorSharding& to,
                                 const CommCost& cost) {
  HEDDLE_ASSERT(from.rank() == mesh.rank() && to.rank() == mesh.rank())
      << from.to_string() << " -> " << to.to_string() << " on " << mesh.to_string();
  if (!from.blocks_nest(type.shape(), mesh))
    return Diagnostic("cannot reshard " + type.to_string() + " on mesh " + mesh.to_string() +
                      " from " + from.to_string() +
                      ": a tensor dim cut by several axes has blocks that do not nest");
  using Key = std::tuple<double, size_t, TensorSharding>;
  std::set<Key> frontier;
  std::map<TensorSharding, std::pair<double, size_t>> best;
  std::map<TensorSharding, ReshardStep> via;
  frontier.insert({0.0, 0, from});
  best[from] = {0.0, 0};
  while (!frontier.empty()) {
    auto [c, n, s] = *frontier.begin();
    frontier.erase(frontier.begin());
    if (s == to) {
      ReshardPlan plan;
      plan.cost = c;
      for (TensorSharding cur = to; cur != from;) {
        const ReshardStep& step = via.at(cur);
        plan.steps.insert(plan.steps.begin(), step);
        cur = step.from;
      }
      return plan;
    }
    if (best.at(s) < std::make_pair(c, n)) continue;
    for (auto& step : reshard_steps(type, mesh, s, cost)) {
      auto key = std::make_pair(c + step.cost, n + 1);
      auto it = best.find(step.to);
      if (it != best.end() && !(key < it->second)) continue;
      best[step.to] = key;
      via.insert_or_assign(step.to, step);
      frontier.insert({key.first, key.second, step.to});
    }
  }
  std::string why;
  if (!to.blocks_nest(type.shape(), mesh))
    why = ": a tensor dim cut by several axes has blocks that do not nest";
  if (why.empty() && to.has_partial()) why = ": a Partial placement cannot be created";
  return Diagnostic("no resharding of " + type.to_string() + " on mesh " + mesh.to_string() +
                    " from " + from.to_string() + " to " + to.to_string() + why);
}

}  // namespace heddle
