// MpiCommunicator: set-up, failure notices, point to point and the agreements over all ranks
// (the collectives are in MpiCollectives.cpp).
#include <unistd.h>

#include <cstring>

#include "MpiCommunicatorImpl.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace heddle {

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
