#include "heddle/runtime/MpiCommunicator.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>
#include <utility>

#include "MpiLiveness.h"
#include "MpiProgress.h"
#include "heddle/ops/Kernel.h"
#include "heddle/support/Assert.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace heddle {

namespace {

constexpr int kTagNotice = 1;  // a failing rank's message to the others (control comm)
constexpr int kTagAck = 2;     // a survivor's acknowledgement of a notice
constexpr int kNoticeBytes = 1024;
constexpr double kAckWaitS = 5;    // how long a failing rank waits for acknowledgements
constexpr double kKillWaitS = 10;  // how long a survivor waits to be stopped by the launcher
constexpr int kTagGather = 3;      // a rank's contribution to an exchange (agree comm)
constexpr int kTagVerdict = 4;     // the root's answer to an exchange
constexpr double kAskGraceS =
    1.5;  // how long a timed-out rank waits for peers to say where they are

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Waits between polls. MPI makes progress on a large message only while the ranks poll, so the
// first milliseconds of a wait spin, then only yield the core; longer waits (a peer still
// computing) sleep.
void pause(Clock::time_point since) {
  double waited = seconds_since(since);
  if (waited > 0.02)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  else if (waited > 1e-4)
    std::this_thread::yield();  // the first 100 us spin: a small message is usually there by then
}

MPI_Datatype mpi_type(const Tensor& t) { return t.is_int() ? MPI_INT64_T : MPI_FLOAT; }
size_t elem_bytes(const Tensor& t) { return t.is_int() ? sizeof(int64_t) : sizeof(float); }
const char* bytes(const Tensor& t) {
  return t.is_int() ? reinterpret_cast<const char*>(t.i64())
                    : reinterpret_cast<const char*>(t.f32());
}
char* bytes(Tensor& t) {
  return t.is_int() ? reinterpret_cast<char*>(t.i64()) : reinterpret_cast<char*>(t.f32());
}

int count_of(int64_t n) {
  HEDDLE_ASSERT(n >= 0 && n <= INT_MAX)
      << "message of " << n << " elements exceeds MPI's int count";
  return static_cast<int>(n);
}

std::string group_text(const std::vector<int64_t>& group) {
  std::string s = "[";
  for (size_t i = 0; i < group.size(); ++i) s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "]";
}

void put_box(const Box& b, std::vector<int64_t>& v) {
  for (int64_t d = 0; d < b.rank(); ++d) v.push_back(b.start()[d]);
  for (int64_t d = 0; d < b.rank(); ++d) v.push_back(b.end()[d]);
}

Box get_box(const int64_t* p, int64_t rank) {
  std::vector<int64_t> s(p, p + rank), e(p + rank, p + 2 * rank);
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

// Where each tile starts in `region`'s row-major layout, when every tile is one run of it and the
// runs cover it exactly once (so an all-gather can land straight in the result); else nullopt.
std::optional<std::vector<int64_t>> runs_of(const std::vector<Box>& tiles, const Box& region) {
  const int64_t r = region.rank();
  const IVec shape = region.shape();
  std::vector<int64_t> starts;
  std::vector<std::pair<int64_t, int64_t>> spans;  // (start, length), sorted below
  for (const Box& t : tiles) {
    if (t.empty() || !region.contains(t)) return std::nullopt;
    // The dims after the last cut one are whole; the ones before it must be 1 wide.
    int64_t cut = r - 1;
    while (cut >= 0 && t.end()[cut] - t.start()[cut] == shape[cut]) --cut;
    for (int64_t e = 0; e < cut; ++e)
      if (t.end()[e] - t.start()[e] != 1) return std::nullopt;
    int64_t start = 0;
    for (int64_t e = 0; e < r; ++e) start = start * shape[e] + (t.start()[e] - region.start()[e]);
    starts.push_back(start);
    spans.emplace_back(start, t.volume());
  }
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [start, len] : spans) {
    if (start != at) return std::nullopt;
    at += len;
  }
  if (at != region.volume()) return std::nullopt;
  return starts;
}

}  // namespace

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

MpiCommunicator::MpiCommunicator(MpiOptions options)
    : options_(options), impl_(std::make_unique<Impl>(*this)) {
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rank_ = r;
  size_ = n;
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->world);
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->control);
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->p2p);
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->agree);
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->done);
  MPI_Irecv(impl_->notice_buf.data(), kNoticeBytes, MPI_CHAR, MPI_ANY_SOURCE, kTagNotice,
            impl_->control, &impl_->notice_req);
  // Every rank's pid, host and process space, so a peer whose process vanishes can be named.
  mpi_liveness::PeerId me = mpi_liveness::this_peer();
  std::vector<mpi_liveness::PeerId> all(static_cast<size_t>(n));
  MPI_Allgather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, impl_->world);
  hosts_.clear();
  for (const auto& id : all) hosts_.emplace_back(id.host);
  const LogConfig log = logging_config();
  mpi_liveness::watch_peers(r, all, log.json, log.timestamps);
  impl_->progress = std::make_unique<ProgressChannel>(r, hosts_);
}

MpiCommunicator::~MpiCommunicator() {
  mpi_liveness::stop_watching();
  impl_->progress.reset();
  if (impl_->notice_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&impl_->notice_req);
    MPI_Wait(&impl_->notice_req, MPI_STATUS_IGNORE);
  }
  for (auto& [group, c] : impl_->comms) MPI_Comm_free(&c);
  if (!impl_->send_reqs.empty()) {  // never flushed (a failure): let MPI finish or drop them
    for (auto& r : impl_->send_reqs)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    for (auto& b : impl_->send_bufs) impl_->graveyard.push_back(std::move(b));
  }
  MPI_Comm_free(&impl_->done);
  MPI_Comm_free(&impl_->agree);
  MPI_Comm_free(&impl_->p2p);
  MPI_Comm_free(&impl_->control);
  MPI_Comm_free(&impl_->world);
}

Status MpiCommunicator::prepare(const std::vector<std::vector<std::vector<int64_t>>>& partitions) {
  for (const auto& partition : partitions) {
    // One split per partition: this rank's color is the index of its group, its key its place.
    int color = MPI_UNDEFINED, key = 0;
    const std::vector<int64_t>* mine = nullptr;
    for (size_t i = 0; i < partition.size() && !mine; ++i) {
      auto it = std::find(partition[i].begin(), partition[i].end(), rank_);
      if (it == partition[i].end()) continue;
      mine = &partition[i];
      color = static_cast<int>(i);
      key = static_cast<int>(it - partition[i].begin());
    }
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &c);
    if (!mine) continue;
    if (c == MPI_COMM_NULL)
      return Diagnostic("MPI_Comm_split gave no communicator for devices " + group_text(*mine));
    if (!impl_->comms.emplace(*mine, c).second) MPI_Comm_free(&c);
  }
  return {};
}

Status MpiCommunicator::collective(Collective c, const std::vector<int64_t>& group,
                                   const Tensor& mine, Tensor& out, Monoid monoid) {
  if (failure_) return *failure_;
  HEDDLE_ASSERT(std::find(group.begin(), group.end(), rank_) != group.end())
      << "rank " << rank_ << " not in " << group_text(group);
  HEDDLE_ASSERT(mine.dtype() == out.dtype() && mine.rank() == out.rank())
      << mine.to_string() << " vs " << out.to_string();
  // A slice of a replicated tile needs nothing from the peers: their tiles over out's region
  // hold the same values (ThreadedWorld copies them in group order, the last one winning).
  if (c == Collective::kSlice && mine.region().contains(out.region())) {
    out.copy_from(mine);
    return {};
  }
  if (group.size() == 2 && c == Collective::kAllReduce && monoid == Monoid::kSum &&
      !mine.is_int() && mine.region() == out.region()) {
    bool differ = false;
    std::vector<CollectiveCall> one{CollectiveCall{c, &group, &mine, &out, monoid}};
    Status st = sum_pairs(one, differ);
    if (!differ) return st;
  }
  return exchange_tiles(c, group, mine, out, monoid);
}

Status MpiCommunicator::exchange_tiles(Collective c, const std::vector<int64_t>& group,
                                       const Tensor& mine, Tensor& out, Monoid monoid) {
  const auto n = static_cast<int64_t>(group.size());
  const int64_t me = std::find(group.begin(), group.end(), rank_) - group.begin();
  const bool reduce = c == Collective::kAllReduce || c == Collective::kReduceScatter;
  const std::string op = std::string(collective_name(c)) + " over devices " + group_text(group);
  const std::string what = n > 1 ? impl_->progress->begin(op, group) : op;

  std::vector<Box> tiles(n), outs(n);  // every member's tile and target region
  std::vector<Tensor> got(n);          // views of what arrived from each peer
  std::vector<char> have(n, 0);        // whether anything of peer q's tile lies in our region
  if (n > 1) {
    auto comm = impl_->comm_for(group);
    if (!comm.ok()) return *(failure_ = comm.error());
    // 1. Regions: each member's tile and target, a few integers.
    const int64_t r = mine.rank();
    const int64_t m = 4 * r + 1;
    std::vector<int64_t> meta{r}, all(static_cast<size_t>(m * n));
    put_box(mine.region(), meta);
    put_box(out.region(), meta);
    // From the second step on, the regions are those of the last step, checked when the data
    // has arrived (wait_checked); before, the data waits for them.
    size_t pos = 0;
    const std::vector<int64_t>* guess = impl_->predict(group, meta, pos);
    MPI_Request meta_req = MPI_REQUEST_NULL;
    MPI_Iallgather(meta.data(), count_of(m), MPI_INT64_T, all.data(), count_of(m), MPI_INT64_T,
                   *comm, &meta_req);
    std::vector<MPI_Request> reqs;
    if (!guess) {
      reqs.assign(1, std::exchange(meta_req, MPI_REQUEST_NULL));
      if (auto st = impl_->wait(reqs, what, group); !st.ok()) {
        impl_->dead_ints.push_back(std::move(all));
        return st;
      }
      impl_->remember(group, pos, meta, all);
    }
    const std::vector<int64_t>& layout = guess ? *guess : all;
    auto wait_data = [&](std::vector<MPI_Request>& rq) {
      return impl_->wait_checked(rq, meta_req, guess, all, what, group);
    };
    for (int64_t q = 0; q < n; ++q) {
      const int64_t* p = layout.data() + q * m;
      HEDDLE_ASSERT(p[0] == r) << what << ": member " << q << " has rank-" << p[0] << " tiles";
      tiles[q] = get_box(p + 1, r);
      outs[q] = get_box(p + 1 + 2 * r, r);
    }
    const MPI_Datatype type = mpi_type(mine);
    const size_t eb = elem_bytes(mine);
    // Buffers abandoned by a failure stay alive: MPI may still touch them.
    auto abandon = [&] {
      impl_->graveyard.push_back(std::exchange(impl_->sbuf, {}));
      impl_->graveyard.push_back(std::exchange(impl_->rbuf, {}));
    };
    // 2a. All-reduce of identical regions: each member combines one slice of the flat buffer
    //     from every member's tile in group order (MPI's alltoallv), then the slices are
    //     all-gathered (allgatherv). Same element-wise order as combining whole tiles, at a
    //     ring's traffic, 2(n-1)/n of the tensor per member.
    bool same = c == Collective::kAllReduce && !mine.is_int();
    for (int64_t q = 0; q < n && same; ++q) same = tiles[q] == out.region() && outs[q] == tiles[q];
    if (same) {
      const int64_t total = mine.numel();
      auto lo = [&](int64_t p) { return p * total / n; };
      const int64_t len = lo(me + 1) - lo(me);
      std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
      for (int64_t p = 0; p < n; ++p) {
        scounts[p] = count_of(lo(p + 1) - lo(p));
        sdispls[p] = count_of(lo(p));
        rcounts[p] = count_of(len);
        rdispls[p] = count_of(p * len);
      }
      // This member's slice of every tile, then (after the first n * len floats) their sum.
      auto* rbuf = reinterpret_cast<float*>(impl_->scratch(impl_->rbuf, (n + 1) * len * eb));
      float* acc = rbuf + n * len;
      reqs.assign(1, MPI_REQUEST_NULL);
      MPI_Ialltoallv(mine.f32(), scounts.data(), sdispls.data(), MPI_FLOAT, rbuf, rcounts.data(),
                     rdispls.data(), MPI_FLOAT, *comm, &reqs[0]);
      if (auto st = wait_data(reqs); !st.ok()) {
        abandon();
        return st;
      }
      if (len > 0) {  // a member whose share is empty (fewer elements than members) has none
        Tensor sum = Tensor::view(DType::kF32, Box(IVec{0}, IVec{len}), acc);
        Tensor piece = Tensor::view(DType::kF32, Box(IVec{0}, IVec{len}), rbuf);
        std::memcpy(acc, rbuf, static_cast<size_t>(len) * eb);
        for (int64_t q = 1; q < n; ++q) {
          piece.rebind(rbuf + q * len);
          kernels::combine(monoid, sum, piece);
        }
      }
      reqs.assign(1, MPI_REQUEST_NULL);
      MPI_Iallgatherv(acc, count_of(len), MPI_FLOAT, out.f32(), scounts.data(), sdispls.data(),
                      MPI_FLOAT, *comm, &reqs[0]);
      if (auto st = impl_->wait(reqs, what, group); !st.ok()) {
        abandon();
        impl_->dead_tensors.push_back(std::exchange(out, Tensor::tile(mine.dtype(), out.region())));
        return st;
      }
      impl_->progress->end(group);
      return {};
    }
    // 2b. Data. Every member needs every whole tile: MPI's allgatherv, straight into out when
    //    the tiles are disjoint row-major runs of it. Halos and ring steps: point-to-point
    //    between overlapping members. Otherwise exactly the overlaps: alltoallv.
    bool whole = c == Collective::kAllGather || c == Collective::kAllReduce;
    for (int64_t p = 0; p < n && whole; ++p)
      for (int64_t q = 0; q < n && whole; ++q) whole = outs[p].contains(tiles[q]);
    auto receive_box = [&](int64_t q) {
      return whole ? tiles[q] : tiles[q].intersect(out.region());
    };
    std::vector<int> rcounts(n, 0), rdispls(n, 0);
    if (whole && c == Collective::kAllGather) {
      if (auto runs = runs_of(tiles, out.region()); runs) {
        for (int64_t q = 0; q < n; ++q) {
          rcounts[q] = count_of(tiles[q].volume());
          rdispls[q] = count_of((*runs)[q]);
        }
        reqs.assign(1, MPI_REQUEST_NULL);
        MPI_Iallgatherv(bytes(mine), count_of(mine.numel()), type, bytes(out), rcounts.data(),
                        rdispls.data(), type, *comm, &reqs[0]);
        if (auto st = wait_data(reqs); !st.ok()) {
          impl_->dead_tensors.push_back(
              std::exchange(out, Tensor::tile(mine.dtype(), out.region())));
          return st;
        }
        impl_->progress->end(group);
        return {};
      }
    }
    int64_t rtotal = 0;
    for (int64_t q = 0; q < n; ++q) {
      rdispls[q] = count_of(rtotal);
      // allgatherv needs this rank's block too; it is copied into its own slot.
      if (q != me || whole) rcounts[q] = count_of(receive_box(q).volume());
      rtotal += rcounts[q];
    }
    char* rbuf = impl_->scratch(impl_->rbuf, rtotal * static_cast<int64_t>(eb));
    reqs.clear();
    if (whole) {
      reqs.emplace_back();
      MPI_Iallgatherv(bytes(mine), count_of(mine.numel()), type, rbuf, rcounts.data(),
                      rdispls.data(), type, *comm, &reqs.back());
    } else {
      // What each peer needs of this tile, copied into the send buffer (or sent straight from
      // the tile when one peer needs all of it).
      std::vector<Box> pieces(n);
      std::vector<int> scounts(n, 0), sdispls(n, 0);
      int64_t stotal = 0, senders = 0;
      for (int64_t p = 0; p < n; ++p) {
        sdispls[p] = count_of(stotal);
        Box b = mine.region().intersect(outs[p]);
        if (p == me || b.empty()) continue;
        pieces[p] = b;
        scounts[p] = count_of(b.volume());
        stotal += scounts[p];
        ++senders;
      }
      const char* sbuf = bytes(mine);
      if (senders != 1 || stotal != mine.numel()) {
        char* s = impl_->scratch(impl_->sbuf, stotal * static_cast<int64_t>(eb));
        for (int64_t p = 0; p < n; ++p)
          if (scounts[p] > 0)
            Tensor::view(mine.dtype(), pieces[p], s + static_cast<size_t>(sdispls[p]) * eb)
                .copy_from(mine);
        sbuf = s;
      } else {
        std::fill(sdispls.begin(), sdispls.end(), 0);
      }
      if (c == Collective::kHaloExchange || c == Collective::kSendRecv) {
        for (int64_t p = 0; p < n; ++p)
          if (scounts[p] > 0) {
            reqs.emplace_back();
            MPI_Isend(sbuf + static_cast<size_t>(sdispls[p]) * eb, scounts[p], type,
                      static_cast<int>(p), 0, *comm, &reqs.back());
          }
        for (int64_t q = 0; q < n; ++q)
          if (rcounts[q] > 0) {
            reqs.emplace_back();
            MPI_Irecv(rbuf + static_cast<size_t>(rdispls[q]) * eb, rcounts[q], type,
                      static_cast<int>(q), 0, *comm, &reqs.back());
          }
      } else {
        reqs.emplace_back();
        MPI_Ialltoallv(sbuf, scounts.data(), sdispls.data(), type, rbuf, rcounts.data(),
                       rdispls.data(), type, *comm, &reqs.back());
      }
    }
    if (auto st = wait_data(reqs); !st.ok()) {
      abandon();
      return st;
    }
    for (int64_t q = 0; q < n; ++q) {
      Box b = receive_box(q);
      if (q == me || b.empty()) continue;
      have[q] = 1;
      got[q] = Tensor::view(mine.dtype(), b, rbuf + static_cast<size_t>(rdispls[q]) * eb);
    }
    impl_->progress->end(group);
  }
  // 3. Assemble in group order, exactly as ThreadedWorld does.
  bool first = true;
  for (int64_t q = 0; q < n; ++q) {
    const Tensor& t = q == me ? mine : got[q];
    if (q != me && !have[q]) {
      first = false;  // as copying a tile outside our region: a no-op that still counts first
      continue;
    }
    if (!reduce || first)
      out.copy_from(t);
    else
      kernels::combine(monoid, out, t);
    first = false;
  }
  return {};
}

Status MpiCommunicator::collectives(const std::vector<CollectiveCall>& calls) {
  if (failure_) return *failure_;
  if (calls.empty()) return {};
  const std::vector<int64_t>& group = *calls[0].group;
  bool fast = group.size() == 2;
  for (const CollectiveCall& k : calls)
    fast = fast && k.c == Collective::kAllReduce && k.monoid == Monoid::kSum && *k.group == group &&
           !k.mine->is_int() && k.mine->region() == k.out->region();
  bool differ = !fast;
  if (fast)
    if (Status st = sum_pairs(calls, differ); !differ) return st;
  for (const CollectiveCall& k : calls)  // every member sees the same regions, so all go here
    if (Status st = collective(k.c, *k.group, *k.mine, *k.out, k.monoid); !st.ok()) return st;
  return {};
}

Status MpiCommunicator::sum_pairs(const std::vector<CollectiveCall>& calls, bool& differ) {
  differ = false;
  const std::vector<int64_t>& group = *calls[0].group;
  auto comm = impl_->comm_for(group);
  if (!comm.ok()) return *(failure_ = comm.error());
  const std::string op = calls.size() == 1 ? "all-reduce over devices " + group_text(group)
                                           : std::to_string(calls.size()) +
                                                 " all-reduces over devices " + group_text(group);
  const std::string what = impl_->progress->begin(op, group);
  // 1. Every call's tile region from each member (a few integers per call, one message).
  std::vector<int64_t> meta;
  for (const CollectiveCall& k : calls) {
    meta.push_back(k.mine->rank());
    put_box(k.mine->region(), meta);
  }
  const auto m = static_cast<int64_t>(meta.size());
  std::vector<int64_t> all(static_cast<size_t>(2 * m));
  // From the second step on, the regions are those of the last step (equal on both members),
  // checked when the data has arrived.
  size_t pos = 0;
  const std::vector<int64_t>* guess = impl_->predict(group, meta, pos);
  MPI_Request meta_req = MPI_REQUEST_NULL;
  MPI_Iallgather(meta.data(), count_of(m), MPI_INT64_T, all.data(), count_of(m), MPI_INT64_T, *comm,
                 &meta_req);
  std::vector<MPI_Request> reqs;
  if (!guess) {
    reqs.assign(1, std::exchange(meta_req, MPI_REQUEST_NULL));
    if (auto st = impl_->wait(reqs, what, group); !st.ok()) {
      impl_->dead_ints.push_back(std::move(all));
      return st;
    }
    differ = !std::equal(meta.begin(), meta.end(), all.begin()) ||
             !std::equal(meta.begin(), meta.end(), all.begin() + m);
    if (differ) {  // every member sees the same regions, so all of them go call by call
      impl_->progress->end(group);
      return {};
    }
    impl_->remember(group, pos, meta, all);
  }
  // 2. The data: every call's all-reduce in flight at once.
  reqs.assign(calls.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < calls.size(); ++i)
    MPI_Iallreduce(calls[i].mine->f32(), calls[i].out->f32(), count_of(calls[i].out->numel()),
                   MPI_FLOAT, MPI_SUM, *comm, &reqs[i]);
  if (auto st = impl_->wait_checked(reqs, meta_req, guess, all, what, group); !st.ok()) {
    for (const CollectiveCall& k : calls)  // MPI may still write into them
      impl_->dead_tensors.push_back(
          std::exchange(*k.out, Tensor::tile(k.out->dtype(), k.out->region())));
    return st;
  }
  impl_->progress->end(group);
  return {};
}

Status MpiCommunicator::send(int64_t to, int64_t tag, const Tensor& t) {
  if (failure_) return *failure_;
  HEDDLE_ASSERT(to >= 0 && to < size_ && tag >= 0 && tag < 32768)
      << "send to " << to << " tag " << tag;
  Impl& s = *impl_;
  // Forget delivered sends, so the lists stay short.
  for (size_t i = 0; i < s.send_reqs.size();) {
    int done = 0;
    MPI_Test(&s.send_reqs[i], &done, MPI_STATUS_IGNORE);
    if (!done) {
      ++i;
      continue;
    }
    s.send_reqs.erase(s.send_reqs.begin() + static_cast<std::ptrdiff_t>(i));
    s.send_bufs.erase(s.send_bufs.begin() + static_cast<std::ptrdiff_t>(i));
  }
  const size_t n = static_cast<size_t>(t.numel()) * elem_bytes(t);
  s.send_bufs.emplace_back(bytes(t), bytes(t) + n);
  s.send_reqs.emplace_back();
  MPI_Isend(s.send_bufs.back().data(), count_of(t.numel()), mpi_type(t), static_cast<int>(to),
            static_cast<int>(tag), s.p2p, &s.send_reqs.back());
  return {};
}

Status MpiCommunicator::recv(int64_t from, int64_t tag, Tensor& out) {
  if (failure_) return *failure_;
  HEDDLE_ASSERT(from >= 0 && from < size_ && tag >= 0 && tag < 32768)
      << "recv from " << from << " tag " << tag;
  std::vector<MPI_Request> reqs(1);
  MPI_Irecv(bytes(out), count_of(out.numel()), mpi_type(out), static_cast<int>(from),
            static_cast<int>(tag), impl_->p2p, &reqs[0]);
  const std::string what = impl_->progress->begin(
      "a receive from rank " + std::to_string(from) + " (tag " + std::to_string(tag) + ")",
      {-2, from});  // numbered apart from collectives (negative: no group's key)
  auto st = impl_->wait(reqs, what, {from});
  if (st.ok()) impl_->progress->end({from});
  if (!st.ok())  // MPI may still write into the buffer: keep it, hand back zeros
    impl_->dead_tensors.push_back(std::exchange(out, Tensor::tile(out.dtype(), out.region())));
  return st;
}

Status MpiCommunicator::flush_sends() {
  if (failure_) return *failure_;
  auto st = impl_->wait(impl_->send_reqs, "delivering point-to-point sends");
  if (st.ok()) {
    impl_->send_reqs.clear();
    impl_->send_bufs.clear();
  }
  return st;
}

Result<int64_t> MpiCommunicator::agree_on_failure(bool ok) {
  auto lowest = min_over_ranks(ok ? size_ : rank_);
  if (!lowest.ok()) return lowest.error();
  return *lowest == size_ ? -1 : *lowest;
}

Result<int64_t> MpiCommunicator::min_over_ranks(int64_t value) {
  auto r = max_over_ranks(-value);
  if (!r.ok()) return r.error();
  return -*r;
}

Result<int64_t> MpiCommunicator::max_over_ranks(int64_t value) {
  if (failure_) return *failure_;
  int64_t result = value;
  std::vector<MPI_Request> reqs(1);
  MPI_Iallreduce(&value, &result, 1, MPI_INT64_T, MPI_MAX, impl_->world, &reqs[0]);
  std::vector<int64_t> all(static_cast<size_t>(size_));
  for (int64_t q = 0; q < size_; ++q) all[static_cast<size_t>(q)] = q;
  const std::string what = impl_->progress->begin("a reduction over all ranks", {-1});
  if (auto st = impl_->wait(reqs, what, all); !st.ok()) return st.error();
  impl_->progress->end(all);
  return result;
}

Result<std::vector<int64_t>> MpiCommunicator::exchange(const std::vector<int64_t>& mine,
                                                       const std::string& what) {
  return impl_->gather_via_root(impl_->agree, mine, what);
}

Result<CompletionVerdict> MpiCommunicator::agree_on_completion(bool ok, int64_t steps) {
  auto all = impl_->gather_via_root(impl_->done, {ok ? 1 : 0, steps}, "the completion agreement");
  if (!all.ok()) return all.error();
  CompletionVerdict v;
  for (int64_t q = 0; q < size_; ++q) {
    const int64_t q_ok = (*all)[2 * q], q_steps = (*all)[2 * q + 1];
    if (!q_ok) v.failed.push_back(q);
    if (q_steps != steps) v.other_steps.emplace_back(q, q_steps);
  }
  return v;
}

void MpiCommunicator::set_step(int64_t step) {
  impl_->progress->set_step(step);
  impl_->step = step;
  impl_->positions.clear();
}

std::string MpiCommunicator::host_of(int64_t rank) const {
  return rank >= 0 && rank < static_cast<int64_t>(hosts_.size()) ? hosts_[rank] : "";
}

void MpiCommunicator::abort_job(const std::string& message, int exit_code) {
  mpi_liveness::mark_reported();  // the launcher's SIGTERM, if it comes, needs no second message
  Impl& s = *impl_;
  auto t0 = Clock::now();
  if (!failure_ && !s.poll_notice()) {
    // The first to fail: tell every peer, wait (bounded) until each has heard, then stop the job.
    std::vector<char> buf(kNoticeBytes, '\0');
    std::memcpy(buf.data(), message.data(), std::min<size_t>(message.size(), kNoticeBytes - 1));
    std::vector<int> acks(static_cast<size_t>(size_), 0);
    std::vector<MPI_Request> reqs;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      reqs.emplace_back();
      MPI_Isend(buf.data(), kNoticeBytes, MPI_CHAR, p, kTagNotice, s.control, &reqs.back());
      reqs.emplace_back();
      MPI_Irecv(&acks[p], 1, MPI_INT, p, kTagAck, s.control, &reqs.back());
    }
    while (seconds_since(t0) < kAckWaitS) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) break;
      pause(t0);
    }
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  } else if (s.failed_peer >= 0) {
    // A peer failed first: acknowledge, then let its MPI_Abort stop this process.
    int one = 1;
    MPI_Request req;
    MPI_Isend(&one, 1, MPI_INT, static_cast<int>(s.failed_peer), kTagAck, s.control, &req);
    while (seconds_since(t0) < kKillWaitS) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      pause(t0);
    }
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  } else {
    MPI_Abort(MPI_COMM_WORLD, exit_code);  // a timeout: nobody to wait for
  }
  std::abort();  // MPI_Abort does not return
}

}  // namespace heddle
