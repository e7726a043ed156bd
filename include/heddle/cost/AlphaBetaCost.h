// Alpha-beta collective times per link class (DESIGN.md "Cost model", nccl-tests formulas), and
// the CommCost that prices resharding on a mesh whose axes map onto a cluster's links.
#pragma once

#include <vector>

#include "heddle/cost/Cluster.h"
#include "heddle/sharding/CommCost.h"

namespace heddle::cost {

/// Seconds for collective `c` over `n` devices on `link`, `bytes` as CommCost::cost defines it:
/// all-reduce `2(n-1) alpha + 2 (n-1)/n S/B`; all-gather, reduce-scatter, all-to-all
/// `(n-1) alpha + (n-1)/n S/B`; halo and send/recv `alpha + S/B`; slice 0; n == 1 costs 0.
/// Precondition: n >= 1, bytes >= 0.
double collective_time(Collective c, int64_t n, double bytes, const LinkClass& link);

/// A CommCost giving alpha-beta seconds on the link class of each mesh axis.
class AlphaBetaCost : public CommCost {
 public:
  /// Maps each axis of `mesh` onto a link of `cluster` (Cluster::axis_link). `byte_scale`
  /// multiplies every buffer size before pricing: the device's element size over the graph's
  /// (`cluster.device.element_bytes / 4` for a float32 graph run in bf16); default 1.
  /// Precondition: byte_scale > 0.
  AlphaBetaCost(const Cluster& cluster, const Mesh& mesh, double byte_scale = 1);
  /// Seconds. Precondition: 0 <= axis < number of mesh axes.
  double cost(Collective c, int64_t axis, int64_t group, double bytes) const override;
  /// Always true: cost() gives seconds.
  bool in_seconds() const override { return true; }
  /// The link class of `axis`. Precondition: axis in range.
  const LinkClass& link(int64_t axis) const;

 private:
  std::vector<LinkClass> links_;
  double byte_scale_ = 1;
};

}  // namespace heddle::cost
