#include "heddle/search/IntraOp.h"

#include <cmath>
#include <map>
#include <optional>

#include "heddle/cost/AlphaBetaCost.h"
#include "heddle/cost/ComputeCost.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/search/LayerBlocks.h"
#include "heddle/search/Reduction.h"
#include "heddle/sharding/Reshard.h"
#include "heddle/support/Strings.h"

namespace heddle::search {

namespace {
constexpr double kForbidden = 1e30;
}  // namespace

std::pair<double, double> StrategyGraph::evaluate(const std::vector<int>& choice) const {
  double cost = 0, memory = 0;
  for (size_t v = 0; v < nodes.size(); ++v) {
    cost += nodes[v].cost.at(static_cast<size_t>(choice[v]));
    memory += nodes[v].memory.at(static_cast<size_t>(choice[v]));
  }
  for (const auto& e : edges) {
    size_t n_to = nodes[e.to].cost.size();
    cost +=
        e.cost.at(static_cast<size_t>(choice[e.from]) * n_to + static_cast<size_t>(choice[e.to]));
  }
  return {cost, memory};
}

Result<StrategyChoice> solve_strategy_graph(const StrategyGraph& sg, const IlpSolver& solver,
                                            const IlpOptions& options) {
  // The least memory any assignment needs: every node at its smallest choice.
  double min_memory = 0;
  for (const auto& n : sg.nodes) {
    HEDDLE_ASSERT(!n.cost.empty() && n.cost.size() == n.memory.size()) << "node without choices";
    min_memory += *std::min_element(n.memory.begin(), n.memory.end());
  }
  if (min_memory > sg.memory_limit)
    return Diagnostic("no plan fits in " + human_bytes(sg.memory_limit) +
                      " per device; the smallest needs " + human_bytes(min_memory));
  // Costs of a plan are often nanoseconds: scale the objective so that its largest coefficient
  // is 1e6 and the solver's absolute tolerances cannot blur the choice. Costs of kForbidden and
  // above mark impossible pairs and get upper bound 0 instead.
  double largest = 0;
  for (const auto& n : sg.nodes)
    for (double c : n.cost)
      if (c < kForbidden) largest = std::max(largest, c);
  for (const auto& e : sg.edges)
    for (double c : e.cost)
      if (c < kForbidden) largest = std::max(largest, c);
  double scale = largest > 0 ? 1e6 / largest : 1.0;
  IlpProblem p;
  std::vector<std::vector<int>> x(sg.nodes.size());
  std::vector<std::pair<int, double>> memory_row;
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    std::vector<std::pair<int, double>> one;
    for (size_t s = 0; s < sg.nodes[v].cost.size(); ++s) {
      double cost = sg.nodes[v].cost[s];
      int c =
          cost >= kForbidden ? p.add_column(0, 0, 0, true) : p.add_column(cost * scale, 0, 1, true);
      x[v].push_back(c);
      one.push_back({c, 1.0});
      if (sg.nodes[v].memory[s] != 0) memory_row.push_back({c, sg.nodes[v].memory[s]});
    }
    p.add_row(std::move(one), 1, 1);
  }
  for (const auto& e : sg.edges) {
    size_t nf = sg.nodes[e.from].cost.size(), nt = sg.nodes[e.to].cost.size();
    if (std::all_of(e.cost.begin(), e.cost.end(), [](double c) { return c == 0; })) continue;
    std::vector<std::vector<std::pair<int, double>>> by_from(nf), by_to(nt);
    for (size_t s = 0; s < nf; ++s)
      for (size_t t = 0; t < nt; ++t) {
        double cost = e.cost[s * nt + t];  // integral through the ties below
        int c = cost >= kForbidden ? p.add_column(0, 0, 0, false)
                                   : p.add_column(cost * scale, 0, 1, false);
        by_from[s].push_back({c, 1.0});
        by_to[t].push_back({c, 1.0});
      }
    for (size_t s = 0; s < nf; ++s) {
      by_from[s].push_back({x[e.from][s], -1.0});
      p.add_row(std::move(by_from[s]), 0, 0);
    }
    for (size_t t = 0; t < nt; ++t) {
      by_to[t].push_back({x[e.to][t], -1.0});
      p.add_row(std::move(by_to[t]), 0, 0);
    }
  }
  if (std::isfinite(sg.memory_limit) && !memory_row.empty())
    p.add_row(std::move(memory_row), -1e300, sg.memory_limit);
  auto sol = solver.solve(p, options);
  HEDDLE_TRY(sol);
  StrategyChoice out;
  for (size_t v = 0; v < sg.nodes.size(); ++v) {
    int pick = 0;
    for (size_t s = 0; s < x[v].size(); ++s)
      if (sol->x[x[v][s]] > 0.5) pick = static_cast<int>(s);
    out.choice.push_back(pick);
  }
  auto [cost, memory] = sg.evaluate(out.choice);
  out.cost = cost;
  out.memory = memory;
  out.optimal = sol->optimal;
  return out;
}

namespace {

double local_bytes(const TensorType& t, const Mesh& mesh, const TensorSharding& s) {
  return static_cast<double>(s.local_shape(t.shape(), mesh).product()) *
         static_cast<double>(dtype_bytes(t.dtype()));
}

// Elementwise and layout ops whose only operand made by an op comes from `prod`: they follow it.
OpId follower_parent(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  OpCategory c = op_kind_info(op.kind).category;
  if (c != OpCategory::kUnary && c != OpCategory::kBinary && c != OpCategory::kSelect &&
      c != OpCategory::kLayout)
    return -1;
  OpId parent = -1;
  for (const Operand& in : op.inputs) {
    const Value& v = g.value(in.value);
    if (v.role != ValueRole::kResult) continue;
    if (parent >= 0 && parent != v.producer) return -1;
    parent = v.producer;
  }
  return parent;
}

}  // namespace

Result<IntraOpPlan> plan_intra_op(const Graph& g, const Mesh& mesh, const Pins& pins,
                                  const IlpSolver& solver, const IntraOpOptions& o) {
  BytesMovedCost bytes_cost;
  std::optional<cost::AlphaBetaCost> links;
  if (o.cluster) links.emplace(*o.cluster, mesh);
  const CommCost& comm = links ? *links : o.cost ? *o.cost : bytes_cost;
  const double bwd = o.cluster && o.train ? 1 : 0;  // backward repeats reshards, doubles compute
  // Candidates and their placements per op: what the roles and tactics leave (tactics pin
  // decisions, the search completes the rest).
  const PinnedChoices choices(g, mesh, pins);
  const std::map<ValueId, TensorSharding> starts = choices.starts();
  std::vector<std::vector<OpStrategy>> cands(static_cast<size_t>(g.num_ops()));
  std::vector<std::vector<StrategyPlacements>> places(static_cast<size_t>(g.num_ops()));
  for (OpId id = 0; id < g.num_ops(); ++id) {
    if (auto pin = pins.ops.find(id); pin != pins.ops.end()) {
      auto p = derive_placements(g, id, mesh, pin->second);
      HEDDLE_TRY(p);
      cands[id] = {pin->second};
      places[id].push_back(std::move(*p));
      continue;
    }
    for (auto& s : enumerate_strategies(g, id, mesh)) {
      if (!choices.allowed(id, s)) continue;
      auto p = derive_placements(g, id, mesh, s);
      if (!p.ok() || !choices.results_agree(id, *p)) continue;
      cands[id].push_back(std::move(s));
      places[id].push_back(std::move(*p));
    }
    if (cands[id].empty()) {
      if (choices.constrained(id)) return choices.unsatisfiable(id);
      auto p = derive_placements(g, id, mesh, OpStrategy::replicated(mesh.rank()));
      HEDDLE_TRY(p);
      cands[id].push_back(OpStrategy::replicated(mesh.rank()));
      places[id].push_back(std::move(*p));
    }
  }
  // Reshard prices depend on the type and the placements only: layers share them.
  std::map<std::tuple<std::string, TensorSharding, TensorSharding>, double> memo;
  auto reshard = [&](ValueId v, const TensorSharding& from, const TensorSharding& to) {
    if (from == to) return 0.0;
    auto key = std::make_tuple(g.type(v).to_string(), from, to);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    auto plan = plan_reshard(g.type(v), mesh, from, to, comm);
    double secs = kForbidden;
    if (plan.ok() && o.cluster) {
      double scale = o.cluster->device.element_bytes / dtype_bytes(g.type(v).dtype());
      secs = 0;
      for (const ReshardStep& st : plan->steps)
        secs += comm.cost(st.op, st.axis, mesh.size(st.axis), st.bytes * scale);
      secs *= 1 + bwd;
    } else if (plan.ok()) {
      secs = comm.in_seconds() ? plan->cost : plan->cost * o.seconds_per_byte;
    }
    memo.emplace(key, secs);
    return secs;
  };

  StrategyGraph sg;
  sg.memory_limit = o.memory_limit_bytes;
  std::vector<bool> param_charged(static_cast<size_t>(g.num_values()), false);
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    StrategyGraph::Node node;
    double flops = op_flops(g, id);
    std::vector<ValueId> new_params;
    for (const auto& in : op.inputs)
      if (g.value(in.value).role == ValueRole::kParam && !param_charged[in.value]) {
        new_params.push_back(in.value);
        param_charged[in.value] = true;
      }
    for (size_t k = 0; k < cands[id].size(); ++k) {
      const OpStrategy& s = cands[id][k];
      const StrategyPlacements& pl = places[id][k];
      double cost = 0, memory = 0;
      if (o.cluster) {
        auto t = cost::op_time(g, id, s.local_index_box(op.space, mesh, 0), o.cluster->device);
        cost = t.seconds * (1 + 2 * bwd);
      } else {
        double parallel = 1;
        for (int64_t a = 0; a < mesh.rank(); ++a)
          if (s.dim(a) >= 0) parallel *= static_cast<double>(mesh.size(a));
        cost = flops / parallel * o.seconds_per_flop;
      }
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        ValueId v = op.inputs[i].value;
        if (g.value(v).role == ValueRole::kResult) continue;
        if (auto pin = starts.find(v); pin != starts.end())
          cost += reshard(v, pin->second, pl.inputs[i].sharding);
        if (std::find(new_params.begin(), new_params.end(), v) == new_params.end()) continue;
        const TensorSharding& ps = pl.inputs[i].sharding;
        double local = local_bytes(g.type(v), mesh, ps);
        memory += local;
        if (bwd > 0)  // the gradient is partial over every axis that splits the op but not it
          for (int64_t a = 0; a < mesh.rank(); ++a)
            if (s.dim(a) >= 0 && !ps.at(a).is_shard())
              cost += links->cost(Collective::kAllReduce, a, mesh.size(a),
                                  local * o.cluster->device.element_bytes /
                                      dtype_bytes(g.type(v).dtype())) /
                      static_cast<double>(std::max<int64_t>(o.micro_batches, 1));
      }
      for (size_t r = 0; r < op.results.size(); ++r)
        memory += local_bytes(g.type(op.results[r].value), mesh, pl.results[r].sharding);
      node.cost.push_back(cost);
      node.memory.push_back(memory);
    }
    sg.nodes.push_back(std::move(node));
  }
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Value& v = g.value(op.inputs[i].value);
      if (v.role != ValueRole::kResult) continue;
      OpId u = v.producer;
      StrategyGraph::Edge e;
      e.from = u;
      e.to = id;
      for (size_t su = 0; su < cands[u].size(); ++su)
        for (size_t sv = 0; sv < cands[id].size(); ++sv)
          e.cost.push_back(
              reshard(op.inputs[i].value,
                      places[u][su].results[static_cast<size_t>(v.result_index)].sharding,
                      places[id][sv].inputs[i].sharding));
      sg.edges.push_back(std::move(e));
    }
  }

  // Smaller problem: followers answer their producers, repeated layers agree.
  RepeatedBlocks blocks;
  if (o.fold_layers) blocks = find_repeated_blocks(g);
  Reduction red = identity_reduction(sg);
  if (o.merge_followers) {
    std::vector<int> parent(sg.nodes.size(), -1);
    for (OpId id = 0; id < g.num_ops(); ++id) {
      OpId p = follower_parent(g, id);
      if (p >= 0 && blocks.block_of(p) == blocks.block_of(id) && !pins.ops.count(id) &&
          !choices.constrained(id))
        parent[static_cast<size_t>(id)] = static_cast<int>(p);
    }
    merge_followers(sg, parent, red);
  }
  if (blocks.count >= 2) {
    const double c = static_cast<double>(blocks.count);
    const double real = c * o.layer_scale;      // blocks the model holds
    const double early = (real - 1) / (c - 1);  // what each block but the last stands for
    std::vector<int> same(sg.nodes.size(), -1);
    for (OpId id = 0; id < g.num_ops(); ++id) {
      int64_t b = blocks.block_of(id);
      if (b >= 0 && b < blocks.count) red.node_weight[id] = b + 1 < blocks.count ? early : 1;
      if (b < 1 || b >= blocks.count || red.root[id] != id) continue;
      OpId twin = id - b * blocks.length;
      if (cands[id] == cands[twin] && red.root[twin] == twin) same[id] = static_cast<int>(twin);
    }
    for (size_t e = 0; e < sg.edges.size(); ++e) {
      int64_t bf = blocks.block_of(sg.edges[e].from), bt = blocks.block_of(sg.edges[e].to);
      bool inside = bf >= 0 && bf < blocks.count;
      // Within or out of a block but the last, and from the prefix into a later block: these
      // stand for (real - 1) / (c - 1) edges of the model each.
      if ((inside && bf + 1 < blocks.count) || (bf < 0 && bt >= 1 && bt < blocks.count))
        red.edge_weight[e] = early;
    }
    tie_nodes(sg, same, red);
  }
  finish_reduction(red);
  StrategyGraph small = reduce_strategy_graph(sg, red);
  auto choice = solve_strategy_graph(small, solver, o.ilp);
  HEDDLE_TRY(choice);
  std::vector<int> full = expand_choice(red, choice->choice);
  IntraOpPlan out;
  out.plan = ShardingPlan::replicated(g, mesh);
  out.plan.pinned = starts;
  for (OpId id = 0; id < g.num_ops(); ++id) out.plan.ops[id] = cands[id][full[id]];
  out.seconds = choice->cost;
  out.memory_bytes = choice->memory;
  out.optimal = choice->optimal;
  out.nodes = static_cast<int64_t>(small.nodes.size());
  for (const auto& n : small.nodes) out.variables += static_cast<int64_t>(n.cost.size());
  for (const auto& e : small.edges) out.variables += static_cast<int64_t>(e.cost.size());
  out.layer_blocks = blocks.count;
  out.layer_ops = blocks.length;
  return out;
}

}  // namespace heddle::search
