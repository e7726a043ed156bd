// Shrinking a strategy graph before the ILP: a node may follow another (its choice becomes a
// function of the other's, as Alpa merges elementwise and reshape ops into their producers), and
// nodes of repeated identical layers may share one set of choices (a 96-layer transformer is one
// layer's problem), each node and edge counted as often as the part of the model it stands for.
#pragma once

#include <vector>

#include "heddle/search/IntraOp.h"

namespace heddle::search {

/// How the nodes of a strategy graph map onto a smaller one.
struct Reduction {
  std::vector<int> root;                ///< per node: the reduced node that decides it
  std::vector<std::vector<int>> table;  ///< per node: its choice for each choice of its root
  std::vector<double> node_weight;      ///< per node: times its cost and memory count; default 1
  std::vector<double> edge_weight;      ///< per edge: times its cost counts; default 1
  int reduced_nodes = 0;                ///< nodes of the reduced graph (roots are 0..n-1)
};

/// The identity reduction of `sg` (every node its own root, weights 1).
Reduction identity_reduction(const StrategyGraph& sg);

/// Makes node `v` follow `parent[v]` (>= 0; -1: stays a root) in `red`: for each choice of the
/// parent, v takes the choice cheapest for itself and the edges from the parent to it (ties: the
/// lowest index). A parent must precede its follower (parent[v] < v) and be a root or a follower
/// itself; the followed choices compose. Precondition: `red` is a reduction of `sg` that has not
/// been renumbered yet (root[v] == v for every root).
void merge_followers(const StrategyGraph& sg, const std::vector<int>& parent, Reduction& red);

/// Ties node `v` to `same[v]` (-1: not tied; otherwise an earlier node with the same choices):
/// they choose alike. Precondition as for merge_followers, applied after it.
void tie_nodes(const StrategyGraph& sg, const std::vector<int>& same, Reduction& red);

/// Renumbers the roots of `red` to 0..n-1 (reduced_nodes = n).
void finish_reduction(Reduction& red);

/// The reduced graph: node costs and memories summed (weighted) over the nodes a root decides;
/// an edge between two nodes of one root becomes node cost, other edges are summed per pair of
/// roots. The memory limit is kept. Forbidden pairs stay forbidden.
StrategyGraph reduce_strategy_graph(const StrategyGraph& sg, const Reduction& red);

/// The choice of every original node for a choice of every reduced node.
std::vector<int> expand_choice(const Reduction& red, const std::vector<int>& reduced);

}  // namespace heddle::search
