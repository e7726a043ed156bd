#include "heddle/cost/AlphaBetaCost.h"

#include "heddle/support/Assert.h"

namespace heddle::cost {

double collective_time(Collective c, int64_t n, double bytes, const LinkClass& link) {
  HEDDLE_ASSERT(n >= 1 && bytes >= 0) << "n " << n << " bytes " << bytes;
  if (n == 1 || c == Collective::kSlice) return 0;
  double steps = static_cast<double>(n - 1), frac = steps / static_cast<double>(n);
  double a = link.latency, s_over_b = bytes / link.bandwidth;
  switch (c) {
    case Collective::kAllReduce:
      return 2 * steps * a + 2 * frac * s_over_b;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return steps * a + frac * s_over_b;
    case Collective::kHaloExchange:
    case Collective::kSendRecv:
      return a + s_over_b;
    case Collective::kSlice:
      return 0;
  }
  HEDDLE_UNREACHABLE();
}

AlphaBetaCost::AlphaBetaCost(const Cluster& cluster, const Mesh& mesh, double byte_scale)
    : byte_scale_(byte_scale) {
  HEDDLE_ASSERT(byte_scale > 0) << "byte scale " << byte_scale;
  for (int64_t a = 0; a < mesh.rank(); ++a) links_.push_back(cluster.axis_link(mesh, a));
}

double AlphaBetaCost::cost(Collective c, int64_t axis, int64_t group, double bytes) const {
  return collective_time(c, group, bytes * byte_scale_, link(axis));
}

const LinkClass& AlphaBetaCost::link(int64_t axis) const {
  HEDDLE_ASSERT(axis >= 0 && axis < static_cast<int64_t>(links_.size())) << "axis " << axis;
  return links_[static_cast<size_t>(axis)];
}

}  // namespace heddle::cost
