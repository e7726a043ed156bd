#include "heddle/sharding/CommCost.h"

#include "heddle/support/Assert.h"

namespace heddle {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllGather:
      return "all-gather";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kSlice:
      return "slice";
    case Collective::kHaloExchange:
      return "halo-exchange";
    case Collective::kSendRecv:
      return "send-recv";
  }
  HEDDLE_UNREACHABLE();
}

double BytesMovedCost::cost(Collective c, int64_t, int64_t group, double bytes) const {
  HEDDLE_ASSERT(group >= 1 && bytes >= 0) << "group " << group << " bytes " << bytes;
  double n = static_cast<double>(group), frac = (n - 1) / n;
  switch (c) {
    case Collective::kAllReduce:
      return 2 * frac * bytes;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return frac * bytes;
    case Collective::kSlice:
      return 0;
    case Collective::kHaloExchange:
    case Collective::kSendRecv:
      return bytes;
  }
  HEDDLE_UNREACHABLE();
}

}  // namespace heddle
