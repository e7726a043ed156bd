// Communicator: the collectives a device program needs, on tiles addressed in global coordinates.
// Implementations: threads sharing memory (ThreadedCommunicator) and MPI ranks (MpiCommunicator).
// Links: point-to-point messages between pipeline stages.
#pragma once

#include <vector>

#include "heddle/ir/IndexSpace.h"
#include "heddle/ops/Tensor.h"
#include "heddle/sharding/CommCost.h"
#include "heddle/support/Result.h"

namespace heddle {

/// One collective of a batch (Communicator::collectives): the arguments of one collective() call.
struct CollectiveCall {
  Collective c = Collective::kAllReduce;        ///< which collective
  const std::vector<int64_t>* group = nullptr;  ///< its members (device ids, in rank order)
  const Tensor* mine = nullptr;                 ///< this device's tile
  Tensor* out = nullptr;                        ///< the result, region set
  Monoid monoid = Monoid::kSum;                 ///< how reductions combine
};

/// One device's end of the collectives. Every member of a group calls the same collective with
/// the same group (device ids, in rank order); all devices of the mesh execute the same sequence
/// of collectives (SPMD), which implementations may rely on.
class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This device's id.
  virtual int64_t rank() const = 0;
  /// Number of devices.
  virtual int64_t size() const = 0;
  /// Runs collective `c` over `group`. `mine` is this device's tile; `out` arrives with its
  /// region set and receives:
  /// - all-gather, all-to-all, halo exchange: the elements of the members' tiles (the region
  ///   must be covered by them);
  /// - all-reduce, reduce-scatter: the members' tiles combined with `monoid` in group order
  ///   (so results are bit-identical run to run), restricted to out's region.
  /// A failure (a peer gone, a timeout) is a diagnostic. Precondition: this rank is in `group`.
  virtual Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                            Tensor& out, Monoid monoid) = 0;
  /// Runs `calls` as if by collective() on each in order (every member passes the same sequence),
  /// but lets implementations meet their peers once for the whole batch and overlap the
  /// transfers. Stops at the first failure. The default calls collective() one by one.
  virtual Status collectives(const std::vector<CollectiveCall>& calls) {
    for (const CollectiveCall& k : calls)
      if (Status st = collective(k.c, *k.group, *k.mine, *k.out, k.monoid); !st.ok()) return st;
    return {};
  }
};

/// Point-to-point messages between devices of the whole mesh (global device ids). Messages with
/// the same sender, receiver and tag arrive in the order they were sent.
class Links {
 public:
  virtual ~Links() = default;
  /// Sends `t` to device `to` without waiting for the receiver (t may be reused on return).
  virtual Status send(int64_t to, int64_t tag, const Tensor& t) = 0;
  /// Receives the next message from `from` with `tag` into `out`, which arrives allocated with
  /// the message's type. A failure (a peer gone, a timeout) is a diagnostic.
  virtual Status recv(int64_t from, int64_t tag, Tensor& out) = 0;
};

}  // namespace heddle
