// MpiCommunicator's state and the helpers its two source files share (MpiCommunicator.cpp: set-up,
// failures, point to point and agreements; MpiCollectives.cpp: the collectives). Private to the
// MPI backend: it includes <mpi.h>.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "MpiLiveness.h"
#include "MpiProgress.h"
#include "heddle/runtime/MpiCommunicator.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace mpi_detail {

inline constexpr int kTagNotice = 1;  // a failing rank's message to the others (control comm)
inline constexpr int kTagAck = 2;     // a survivor's acknowledgement of a notice
inline constexpr int kNoticeBytes = 1024;
inline constexpr double kAckWaitS = 5;    // how long a failing rank waits for acknowledgements
inline constexpr double kKillWaitS = 10;  // how long a survivor waits to be stopped by the launcher
inline constexpr int kTagGather = 3;      // a rank's contribution to an exchange (agree comm)
inline constexpr int kTagVerdict = 4;     // the root's answer to an exchange
inline constexpr double kAskGraceS =
    1.5;  // how long a timed-out rank waits for peers to say where they are

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Waits between polls. MPI makes progress on a large message only while the ranks poll, so the
// first milliseconds of a wait spin, then only yield the core; longer waits (a peer still
// computing) sleep.
inline void pause(Clock::time_point since) {
  double waited = seconds_since(since);
  if (waited > 0.02)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  else if (waited > 1e-4)
    std::this_thread::yield();  // the first 100 us spin: a small message is usually there by then
}

inline MPI_Datatype mpi_type(const Tensor& t) { return t.is_int() ? MPI_INT64_T : MPI_FLOAT; }
inline size_t elem_bytes(const Tensor& t) { return t.is_int() ? sizeof(int64_t) : sizeof(float); }
inline const char* bytes(const Tensor& t) {
  return t.is_int() ? reinterpret_cast<const char*>(t.i64())
                    : reinterpret_cast<const char*>(t.f32());
}
inline char* bytes(Tensor& t) {
  return t.is_int() ? reinterpret_cast<char*>(t.i64()) : reinterpret_cast<char*>(t.f32());
}

inline int count_of(int64_t n) {
  HEDDLE_ASSERT(n >= 0 && n <= INT_MAX)
      << "message of " << n << " elements exceeds MPI's int count";
  return static_cast<int>(n);
}

inline std::string group_text(const std::vector<int64_t>& group) {
  std::string s = "[";
  for (size_t i = 0; i < group.size(); ++i) s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "]";
}

inline void put_box(const Box& b, std::vector<int64_t>& v) {
  for (int64_t d = 0; d < b.rank(); ++d) v.push_back(b.start()[d]);
  for (int64_t d = 0; d < b.rank(); ++d) v.push_back(b.end()[d]);
}

inline Box get_box(const int64_t* p, int64_t rank) {
  std::vector<int64_t> s(p, p + rank), e(p + rank, p + 2 * rank);
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

}  // namespace mpi_detail

using namespace mpi_detail;  // NOLINT: only the backend's two source files include this header

struct MpiCommunicator::Impl {
  explicit Impl(MpiCommunicator& s) : self(s) {}

  MpiCommunicator& self;
  MPI_Comm world = MPI_COMM_NULL;    // a dup of the world for the final agreement
  MPI_Comm control = MPI_COMM_NULL;  // a dup of the world for failure notices and acks
  MPI_Comm p2p = MPI_COMM_NULL;      // a dup of the world for point-to-point messages
  MPI_Comm agree = MPI_COMM_NULL;    // a dup of the world for exchanges (launch agreement)
  MPI_Comm done = MPI_COMM_NULL;     // a dup of the world for the completion agreement only
  // Sends not yet known to be delivered, with their buffers.
  std::vector<MPI_Request> send_reqs;
  std::vector<std::vector<char>> send_bufs;
  MPI_Request notice_req = MPI_REQUEST_NULL;
  std::vector<char> notice_buf = std::vector<char>(kNoticeBytes);
  int64_t failed_peer = -1;
  std::map<std::vector<int64_t>, MPI_Comm> comms;
  // Buffers of requests abandoned by a failure: MPI may still touch them until the job ends.
  std::vector<std::vector<char>> graveyard;
  std::vector<Tensor> dead_tensors;
  std::vector<std::vector<int64_t>> dead_ints;
  std::unique_ptr<ProgressChannel> progress;  // where each rank waits (timeout messages)
  // Staging buffers of exchange_tiles(), kept from call to call so steady steps allocate nothing.
  std::vector<char> sbuf, rbuf;
  // The regions of the members at each position of each group's collectives in a step, as seen
  // in the last step that got there: a step runs the same program as the one before, so from the
  // second step on the data goes out together with the regions, one round trip instead of two.
  struct Layout {
    std::vector<int64_t> mine;  // this rank's metadata
    std::vector<int64_t> all;   // every member's, in group order
  };
  std::map<std::vector<int64_t>, std::vector<Layout>> layouts;
  std::map<std::vector<int64_t>, size_t> positions;  // per group: collectives so far this step
  int64_t step = 0;

  // The members' metadata at this collective's position of `group` in the last step, when this
  // rank's was `mine` then; else null. Sets `pos` (SIZE_MAX before the first step: nothing kept).
  const std::vector<int64_t>* predict(const std::vector<int64_t>& group,
                                      const std::vector<int64_t>& mine, size_t& pos) {
    pos = SIZE_MAX;
    if (step <= 0) return nullptr;
    pos = positions[group]++;
    const std::vector<Layout>& seen = layouts[group];
    return pos < seen.size() && seen[pos].mine == mine ? &seen[pos].all : nullptr;
  }
  void remember(const std::vector<int64_t>& group, size_t pos, const std::vector<int64_t>& mine,
                const std::vector<int64_t>& all) {
    if (pos == SIZE_MAX) return;
    std::vector<Layout>& seen = layouts[group];
    if (seen.size() <= pos) seen.resize(pos + 1);
    seen[pos] = Layout{mine, all};
  }

  // Starts the all-gather of this rank's `meta` into `all` (every member's, in group order) over
  // `comm` at position `pos` (predict()). With a prediction, sets `guess` to it and leaves the
  // request in `meta_req` for wait_checked(); else waits for it (guess stays null).
  Status regions(MPI_Comm comm, const std::vector<int64_t>& group, const std::vector<int64_t>& meta,
                 std::vector<int64_t>& all, const std::string& what, size_t& pos,
                 const std::vector<int64_t>*& guess, MPI_Request& meta_req) {
    guess = predict(group, meta, pos);
    const int len = count_of(static_cast<int64_t>(meta.size()));
    MPI_Iallgather(meta.data(), len, MPI_INT64_T, all.data(), len, MPI_INT64_T, comm, &meta_req);
    if (guess) return {};
    std::vector<MPI_Request> reqs{std::exchange(meta_req, MPI_REQUEST_NULL)};
    Status st = wait(reqs, what, group);
    if (!st.ok()) dead_ints.push_back(std::move(all));  // MPI may still write into it
    return st;
  }

  // Waits for `reqs` and for the metadata request `meta` (when still pending: its result `all`
  // was predicted as `*guess`), then checks the prediction. MPI may still write into `all` after a
  // failure, so it is kept then.
  Status wait_checked(std::vector<MPI_Request>& reqs, MPI_Request& meta,
                      const std::vector<int64_t>* guess, std::vector<int64_t>& all,
                      const std::string& what, const std::vector<int64_t>& group) {
    const bool check = meta != MPI_REQUEST_NULL;
    if (check) reqs.push_back(std::exchange(meta, MPI_REQUEST_NULL));
    if (Status st = wait(reqs, what, group); !st.ok()) {
      if (check) dead_ints.push_back(std::move(all));
      return st;
    }
    if (check && all != *guess) {
      self.failure_ = Diagnostic(what +
                                 ": the members' tile regions differ from the last step's "
                                 "at this collective (devices out of step)");
      self.failure_kind_ = FailureKind::kInternal;
      return *self.failure_;
    }
    return {};
  }

  // `v` grown to at least `n` bytes; its data.
  static char* scratch(std::vector<char>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }

  // True (and failure_ set) once a peer's failure notice has arrived.
  bool poll_notice() {
    if (failed_peer >= 0) return true;
    if (notice_req == MPI_REQUEST_NULL) return false;
    int flag = 0;
    MPI_Status st;
    MPI_Test(&notice_req, &flag, &st);
    if (!flag) return false;
    failed_peer = st.MPI_SOURCE;
    notice_buf.back() = '\0';
    if (!self.failure_) {
      self.failure_ =
          Diagnostic("rank " + std::to_string(failed_peer) + " failed: " + notice_buf.data());
      self.failure_kind_ = FailureKind::kPeerLost;
    }
    return true;
  }

  // Waits for `reqs` of the operation `what` (its numbered name from progress->begin()); after
  // the timeout, asks `members` (empty: nobody) where they are, so the message names the ranks
  // that never arrived.
  Status wait(std::vector<MPI_Request>& reqs, const std::string& what,
              const std::vector<int64_t>& members = {}) {
    auto t0 = Clock::now();
    double next_look = 1;  // seconds into the wait when to look for dead peers next
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return {};
      if (poll_notice()) return *self.failure_;
      progress->serve();
      if (seconds_since(t0) > next_look) {
        next_look += 1;
        if (int dead = mpi_liveness::dead_peer(); dead >= 0) {
          self.failure_ = Diagnostic("rank " + std::to_string(dead) +
                                     " failed: its process is gone (killed or crashed) while " +
                                     what + " waited for it");
          self.failure_kind_ = FailureKind::kPeerLost;
          return *self.failure_;
        }
      }
      if (seconds_since(t0) > self.options_.timeout_s) {
        const std::string who = members.empty() ? "a peer is stuck or gone"
                                                : progress->missing(what, members, kAskGraceS);
        self.failure_ =
            Diagnostic(what + " did not complete within " + fmt_seconds(self.options_.timeout_s) +
                       " s on rank " + std::to_string(self.rank_) + ": " + who +
                       " (raise --timeout if it is only slow)");
        self.failure_kind_ = FailureKind::kTimeout;
        return *self.failure_;
      }
      pause(t0);
    }
  }

  // Every rank's `mine` (all of length `len`), in rank order, through rank 0 (point to point on
  // `comm`), so that a wait past the timeout names the ranks that never arrived.
  Result<std::vector<int64_t>> gather_via_root(MPI_Comm comm, const std::vector<int64_t>& mine,
                                               const std::string& what) {
    if (self.failure_) return *self.failure_;
    const size_t len = mine.size();
    const int n = static_cast<int>(self.size_);
    std::vector<int64_t> all(len * static_cast<size_t>(n));
    std::copy(mine.begin(), mine.end(),
              all.begin() + static_cast<std::ptrdiff_t>(len * self.rank_));
    std::vector<int64_t> send = mine;
    std::vector<MPI_Request> reqs;
    std::vector<int> from;  // the rank each request waits for
    std::vector<int64_t> everyone(static_cast<size_t>(n));
    std::iota(everyone.begin(), everyone.end(), int64_t{0});
    progress->begin(what, {-3});  // peers asking where this rank is learn `what`
    if (self.rank_ == 0) {
      for (int q = 1; q < n; ++q) {
        reqs.emplace_back();
        from.push_back(q);
        MPI_Irecv(all.data() + len * static_cast<size_t>(q), count_of(static_cast<int64_t>(len)),
                  MPI_INT64_T, q, kTagGather, comm, &reqs.back());
      }
    } else {
      reqs.resize(2);
      from = {0, 0};
      MPI_Isend(send.data(), count_of(static_cast<int64_t>(len)), MPI_INT64_T, 0, kTagGather, comm,
                &reqs[0]);
      MPI_Irecv(all.data(), count_of(static_cast<int64_t>(all.size())), MPI_INT64_T, 0, kTagVerdict,
                comm, &reqs[1]);
    }
    auto t0 = Clock::now();
    double next_look = 1;
    for (;;) {
      bool all_done = true;
      for (auto& r : reqs) {
        int flag = 1;
        if (r != MPI_REQUEST_NULL) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        all_done = all_done && flag;
      }
      if (all_done) break;
      if (poll_notice()) return *self.failure_;
      progress->serve();
      if (seconds_since(t0) > next_look) {
        next_look += 1;
        if (int dead = mpi_liveness::dead_peer(); dead >= 0) {
          self.failure_ =
              Diagnostic("rank " + std::to_string(dead) +
                         " failed: its process is gone (killed or crashed) before " + what);
          self.failure_kind_ = FailureKind::kPeerLost;
          return *self.failure_;
        }
      }
      if (seconds_since(t0) > self.options_.timeout_s) {
        std::string missing;
        for (size_t i = 0; i < reqs.size(); ++i)
          if (reqs[i] != MPI_REQUEST_NULL && (self.rank_ == 0 || i == 1))
            missing += (missing.empty() ? "" : ", ") + std::to_string(from[i]);
        self.failure_ = Diagnostic(
            what + " did not complete within " + fmt_seconds(self.options_.timeout_s) +
            " s on rank " + std::to_string(self.rank_) + ": rank(s) " + missing +
            " never arrived (stuck, gone, or running different steps; raise --timeout if only "
            "slow)");
        self.failure_kind_ = FailureKind::kTimeout;
        dead_ints.push_back(std::move(all));  // MPI may still write into them
        dead_ints.push_back(std::move(send));
        return *self.failure_;
      }
      pause(t0);
    }
    if (self.rank_ == 0) {  // everyone's contributions, back to everyone
      reqs.clear();
      for (int q = 1; q < n; ++q) {
        reqs.emplace_back();
        MPI_Isend(all.data(), count_of(static_cast<int64_t>(all.size())), MPI_INT64_T, q,
                  kTagVerdict, comm, &reqs.back());
      }
      if (auto st = wait(reqs, what); !st.ok()) return st.error();
    }
    progress->end(everyone);
    return all;
  }

  Result<MPI_Comm> comm_for(const std::vector<int64_t>& group) {
    if (auto it = comms.find(group); it != comms.end()) return it->second;
    MPI_Group world_group, sub;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    std::vector<int> ranks(group.begin(), group.end());
    MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &sub);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, /*tag=*/7, &c);
    MPI_Group_free(&sub);
    MPI_Group_free(&world_group);
    if (rc != MPI_SUCCESS || c == MPI_COMM_NULL)
      return Diagnostic("could not create a communicator for devices " + group_text(group));
    comms.emplace(group, c);
    return c;
  }
};

}  // namespace heddle
