// No silent fallback: for a finished plan, the ops a mesh axis leaves unsplit and why, dim by dim
// (the projection form or halo that derive_placements refuses, an extent the axis does not
// divide, the axis role a preset gave, a tactic, or propagation's cost estimate), and the axes
// that split no op at all. `heddle show`, `run` and `plan` print it (docs/sharding.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/sharding/Propagate.h"

namespace heddle {

/// Why a mesh axis does not split one index dim of an op.
enum class NoSplit : uint8_t {
  kDivisibility,  ///< the devices splitting the dim do not divide its extent
  kForm,          ///< the projections refuse the split (strided shards, a halo of a block, ...)
  kRole,          ///< valid, but the axis role (dp: batch dims, tp: model dims) excludes the dim
  kTactic,        ///< valid, but a tactic or preset pins the op's strategy
  kCost,          ///< valid and allowed; the planner estimated the unsplit op cheaper
};

/// `divisibility`, `form`, `role`, `tactic`, `cost` (the JSON `reason`).
std::string_view no_split_name(NoSplit r);

/// One index dim an axis leaves unsplit.
struct DimVerdict {
  int64_t dim = 0;
  NoSplit reason = NoSplit::kForm;
  std::string detail;  ///< a sentence: derive_placements' diagnostic, the role's rule, ...
};

/// An op that axis `axis` leaves unsplit although it has index dims of extent > 1.
struct UnsplitOp {
  OpId op = -1;
  int64_t axis = 0;
  std::vector<DimVerdict> dims;  ///< its dims of extent > 1, in index-space order
  /// True when some dim could have been split (role, tactic or cost kept it whole).
  bool could_split() const;
};

/// What a plan leaves unsplit on a mesh.
struct SplitReport {
  std::vector<UnsplitOp> unsplit;  ///< by op, then axis
  std::vector<int64_t> idle_axes;  ///< axes of size > 1 that split no op
  /// Ops left whole on every axis of size > 1 (`{x: -}`).
  int64_t replicated_ops = 0;

  /// For people: a line per idle axis, a count per axis and reason, then up to `limit` ops with
  /// their dims' reasons (`... N more` after). Empty on one device.
  std::string to_string(const Graph& g, const Mesh& mesh, size_t limit = 8) const;
};

/// One line on `u`: `op 'add' defining %y [i=64, t=3:sum] not split on tp=4: i: ...; t: ...`.
std::string unsplit_text(const Graph& g, const Mesh& mesh, const UnsplitOp& u);

/// The report for `plan` (of `g`, made with `pins`): for every op and every mesh axis of size
/// > 1 that the op's strategy does not use, each index dim of extent > 1 tried as the axis's
/// split next to the op's other axes, judged by derive_placements() and strategy_allowed().
/// Precondition: `g` passed verify(); `plan` is for `g` on `plan.mesh`.
SplitReport split_report(const Graph& g, const Pins& pins, const ShardingPlan& plan);

}  // namespace heddle
