// Collectives between MPI ranks, one rank per device (world rank = device id): a communicator per
// group, tiles exchanged with non-blocking MPI collectives or point-to-point and assembled
// locally, reductions combined in group order; every wait polls for peer failures and a timeout.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "heddle/runtime/Communicator.h"
#include "heddle/support/ExitCode.h"

namespace heddle {

/// What the ranks said at the end of a run (MpiCommunicator::agree_on_completion).
struct CompletionVerdict {
  std::vector<int64_t> failed;  ///< ranks that reported failure, ascending
  /// Ranks whose step count differs from this rank's, with theirs.
  std::vector<std::pair<int64_t, int64_t>> other_steps;
  /// True when every rank succeeded after the same number of steps.
  bool ok() const { return failed.empty() && other_steps.empty(); }
};

/// Options of MpiCommunicator.
struct MpiOptions {
  /// Seconds any single wait (a collective, the final agreement) may take before it fails with a
  /// diagnostic naming the collective and its group. Default 60.
  double timeout_s = 60;
};

/// One rank's end of the MPI collectives. A slice of a tile that covers its result is a local
/// copy (no message). A float sum all-reduce of identical whole tiles over two ranks is split in
/// halves: each member receives the peer's tile's half of its own, sums that half in group order
/// straight into its result, and sends it to the peer (point to point, from the tile and into the
/// result); over more ranks, or other monoids, it maps onto MPI_Ialltoallv (each member combines
/// one slice of every tile in group order) plus MPI_Iallgatherv of the slices; an all-gather whose
/// members all need every tile onto point-to-point sends of the tile to every peer (received
/// straight into the result when each tile is one row-major run of it); other
/// region layouts (reduce-scatter, all-to-all) onto MPI_Ialltoallv of exactly the overlapping
/// pieces, combined in group order; halo fetches onto MPI_Isend/MPI_Irecv between the members that
/// overlap. Every element is combined in group order, so results are bit-identical run to run and
/// equal to ThreadedWorld's. Each call (but a slice) all-gathers the members' tile and target
/// regions (a few integers): in the first step (set_step) before the data, from the second on
/// alongside it, the data moving along the regions seen at the same place (group and position) of
/// the step before, since every step runs the same program; a rank whose peer's regions differ
/// from that prediction fails with a diagnostic ("devices out of step"). Staging buffers are
/// kept from call to call.
///
/// Failures: a rank that fails calls abort_job(), which tells every other rank; their pending and
/// later collectives then return a diagnostic naming it. A peer in this process's PID namespace
/// under the same kernel boot (not merely the same host name: containers share that) whose
/// process is gone (killed, crashed) is noticed within about a second of waiting and named the
/// same way; the launcher's SIGTERM after such a death prints which peer is gone and exits 5
/// (peer lost); a SIGTERM with no peer gone (scancel, preemption) exits 143 (with --json as a JSON
/// failure record). A wait longer than the timeout returns a diagnostic naming the members that
/// never arrived (a progress side channel: each rank answers where it waits). After any failure
/// every later collective returns the same diagnostic at once.
class MpiCommunicator : public Communicator, public Links {
 public:
  /// Precondition: an MpiEnvironment is alive (and outlives this object).
  explicit MpiCommunicator(MpiOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }

  /// Creates communicators up front: one MPI_Comm_split per partition (disjoint groups, each in
  /// rank order), giving every member of a group its communicator. Collective over all ranks:
  /// every rank must pass the same partitions in the same order. Groups not prepared are created
  /// on first use with MPI_Comm_create_group (collective over the members only).
  Status prepare(const std::vector<std::vector<std::vector<int64_t>>>& partitions);

  Status collective(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                    Tensor& out, Monoid monoid) override;
  /// A batch of float sum all-reduces over one group of two ranks whose tiles all cover their
  /// results: one all-gather of every call's regions, then every call's halves exchanged as in
  /// collective() (each member sums one half), all calls in flight together. A batch of all-gathers
  /// over one group whose members need every whole tile: gather_batch(). Other batches go call
  /// by call. Every rank must pass the same batches (DeviceExecutor::collective_batches).
  Status collectives(const std::vector<CollectiveCall>& calls) override;

  /// Point to point (pipeline stages): MPI_Isend of a copy, completed later (flush_sends()), and
  /// MPI_Irecv waited on like a collective. Tags must be below 32768.
  Status send(int64_t to, int64_t tag, const Tensor& t) override;
  Status recv(int64_t from, int64_t tag, Tensor& out) override;
  /// Waits until every send has been delivered (or failed like a collective).
  Status flush_sends();

  /// Collective over all ranks: the lowest rank whose `ok` is false, or -1 when every rank is ok.
  /// Also a barrier. Fails like a collective (a peer gone, the timeout).
  Result<int64_t> agree_on_failure(bool ok);
  /// Collective over all ranks: the largest (smallest) of every rank's `value`. Fails like a
  /// collective.
  Result<int64_t> max_over_ranks(int64_t value);
  Result<int64_t> min_over_ranks(int64_t value);

  /// Collective over all ranks: every rank's `mine` (each of the same length), in rank order.
  /// Goes through rank 0 point to point, on a communicator of its own, so a wait past the timeout
  /// names the ranks that never arrived (`what` names the exchange in messages). For the launch
  /// agreement (digests of arguments, model, inputs and plan).
  Result<std::vector<int64_t>> exchange(const std::vector<int64_t>& mine, const std::string& what);

  /// The completion agreement, on a communicator used for nothing else (so no other collective can
  /// satisfy it): every rank says whether it succeeded and after how many steps; each learns which
  /// ranks failed or ran a different number of steps. Fails like exchange().
  Result<CompletionVerdict> agree_on_completion(bool ok, int64_t steps);

  /// Step `step` begins (1-based; 0 before the first, when no regions are predicted). Waits are
  /// numbered within a step, per group, so a timeout names the operation (`all-reduce over devices
  /// [0, 1] (#37 of step 3)`); the timed-out rank then asks the group's members where they wait and
  /// names those that never arrived, with when it last saw them.
  void set_step(int64_t step);

  /// The host name rank `rank` reported at construction (empty when unknown).
  std::string host_of(int64_t rank) const;

  /// The failure seen so far (a peer's notice, a timeout), if any.
  const std::optional<Diagnostic>& failure() const { return failure_; }
  /// The class of failure(): kPeerLost for a peer's notice or a vanished process, kTimeout for a
  /// wait past the timeout. Meaningful only when failure() is set.
  FailureKind failure_kind() const { return failure_kind_; }

  /// Ends the whole job with exit code `exit_code` (support/ExitCode.h; default 2, an internal
  /// error); never returns. When this
  /// rank is the first to fail (no failure() yet), first tells every other rank `message` so each
  /// can report which rank failed, and waits up to a few seconds for them to acknowledge. When a
  /// peer failed first, acknowledges its notice and waits for the launcher to stop this process
  /// (which the failed rank's MPI_Abort triggers).
  [[noreturn]] void abort_job(const std::string& message, int exit_code = 2);

 private:
  struct Impl;  // MPI handles stay out of this header, so users need no MPI include path
  friend struct Impl;

  /// collective() in general: the members' regions exchanged, then the data (see the class
  /// comment).
  Status exchange_tiles(Collective c, const std::vector<int64_t>& group, const Tensor& mine,
                        Tensor& out, Monoid monoid);
  /// `calls`, float sum all-reduces over one group of two ranks whose tiles cover their results:
  /// one all-gather of every call's regions, then member 0 sums the first half of every call and
  /// member 1 the second (group order), each from its tile and the peer's half, straight into its
  /// result, and the summed halves are exchanged. When the members' regions differ, sets `differ`
  /// and does nothing more.
  Status sum_pairs(const std::vector<CollectiveCall>& calls, bool& differ);
  /// `calls`, all-gathers over one group whose members all need every whole tile (of one dtype):
  /// one all-gather of every call's regions, every member's tiles packed in call order and sent
  /// to every peer (point to point), then each result assembled in group order. When the
  /// regions do not fit (some member's target misses a tile), sets `differ` and does nothing
  /// more.
  Status gather_batch(const std::vector<CollectiveCall>& calls, bool& differ);

  MpiOptions options_;
  int64_t rank_ = 0;
  int64_t size_ = 1;
  std::unique_ptr<Impl> impl_;
  std::optional<Diagnostic> failure_;
  FailureKind failure_kind_ = FailureKind::kUser;
  std::vector<std::string> hosts_;  ///< every rank's host name
};

}  // namespace heddle
