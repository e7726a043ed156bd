// The communication-cost interface resharding and lowering are priced through. The default counts
// bytes each device sends; the cost model supplies alpha-beta times per link class.
#pragma once

#include <cstdint>
#include <string_view>

namespace heddle {

/// The collectives and point-to-point transfers heddle emits.
enum class Collective : uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kAllToAll,
  kSlice,         ///< local, free
  kHaloExchange,  ///< neighbour send/recv of boundary rows
  kSendRecv,      ///< point to point between stages
};

/// `all-gather`, `reduce-scatter`, ...
std::string_view collective_name(Collective c);

/// Prices one collective over the group of mesh axis `axis` (`group` devices).
class CommCost {
 public:
  virtual ~CommCost() = default;
  /// Cost of `c` on a buffer of `bytes` (for gathers the gathered size, for reductions and
  /// all-to-all the per-device input size, for halos and send/recv the bytes sent).
  /// Precondition: group >= 1, bytes >= 0.
  virtual double cost(Collective c, int64_t axis, int64_t group, double bytes) const = 0;
  /// True when cost() is already seconds, so callers must not scale it by a time per byte
  /// (PropagateOptions::seconds_per_byte). Default false: cost() counts bytes.
  virtual bool in_seconds() const { return false; }
};

/// Bytes each device sends (ring algorithms): all-reduce 2(n-1)/n S, all-gather, reduce-scatter
/// and all-to-all (n-1)/n S, halo and send/recv S, slice 0.
class BytesMovedCost : public CommCost {
 public:
  double cost(Collective c, int64_t axis, int64_t group, double bytes) const override;
};

}  // namespace heddle
