// The progress side channel behind MpiProgress.h: a question is one integer sent to a peer, the
// answer the name of the operation the peer waits in and for how long, both on a duplicate of the
// world used for nothing else.
#include "MpiProgress.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

namespace heddle {

namespace {

constexpr int kTagQuestion = 1;
constexpr int kTagAnswer = 2;
constexpr size_t kLabelBytes = 496;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

struct ProgressChannel::Reply {
  struct Body {
    int64_t waited_ms = -1;  // -1: not waiting anywhere
    char label[kLabelBytes] = {};
  } body;
  MPI_Request req = MPI_REQUEST_NULL;
};

ProgressChannel::ProgressChannel(int rank, std::vector<std::string> hosts)
    : rank_(rank), hosts_(std::move(hosts)), seen_(hosts_.size()) {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Irecv(&query_buf_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagQuestion, comm_, &query_req_);
}

ProgressChannel::~ProgressChannel() {
  if (query_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&query_req_);
    MPI_Wait(&query_req_, MPI_STATUS_IGNORE);
  }
  for (auto& r : replies_)
    if (r->req != MPI_REQUEST_NULL) MPI_Request_free(&r->req);
  MPI_Comm_free(&comm_);
  for (auto& r : replies_) abandoned_.push_back(std::move(r));  // freed requests may still send
}

void ProgressChannel::set_step(int64_t step) {
  if (step == step_) return;
  step_ = step;
  counts_.clear();
}

std::string ProgressChannel::begin(const std::string& what, const std::vector<int64_t>& stream) {
  const int64_t k = ++counts_[stream];
  current_ = what + " (#" + std::to_string(k) +
             (step_ > 0 ? " of step " + std::to_string(step_) : " before the first step") + ")";
  since_ = Clock::now();
  return current_;
}

void ProgressChannel::end(const std::vector<int64_t>& members) {
  const auto now = Clock::now();
  for (int64_t q : members)
    if (q >= 0 && q < static_cast<int64_t>(seen_.size()))
      seen_[static_cast<size_t>(q)] = {current_, now};
  current_.clear();
}

void ProgressChannel::serve() {
  // Forget answers delivered.
  replies_.erase(std::remove_if(replies_.begin(), replies_.end(),
                                [](const std::unique_ptr<Reply>& r) {
                                  int done = 0;
                                  MPI_Test(&r->req, &done, MPI_STATUS_IGNORE);
                                  return done != 0;
                                }),
                 replies_.end());
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (query_req_ == MPI_REQUEST_NULL) return;
    MPI_Test(&query_req_, &flag, &st);
    if (!flag) return;
    auto r = std::make_unique<Reply>();
    if (!current_.empty()) {
      r->body.waited_ms = static_cast<int64_t>(
          std::chrono::duration<double, std::milli>(Clock::now() - since_).count());
      std::memcpy(r->body.label, current_.data(), std::min(current_.size(), kLabelBytes - 1));
    }
    MPI_Isend(&r->body, sizeof r->body, MPI_BYTE, st.MPI_SOURCE, kTagAnswer, comm_, &r->req);
    replies_.push_back(std::move(r));
    MPI_Irecv(&query_buf_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagQuestion, comm_, &query_req_);
  }
}

std::string ProgressChannel::missing(const std::string& label, const std::vector<int64_t>& members,
                                     double grace_s) {
  struct Asked {
    int64_t rank;
    std::unique_ptr<Reply> question, answer;
  };
  std::vector<Asked> asked;
  for (int64_t q : members) {
    if (q == rank_) continue;
    Asked a{q, std::make_unique<Reply>(), std::make_unique<Reply>()};
    a.question->body.waited_ms = 1;
    MPI_Isend(&a.question->body.waited_ms, 1, MPI_INT64_T, static_cast<int>(q), kTagQuestion, comm_,
              &a.question->req);
    MPI_Irecv(&a.answer->body, sizeof a.answer->body, MPI_BYTE, static_cast<int>(q), kTagAnswer,
              comm_, &a.answer->req);
    asked.push_back(std::move(a));
  }
  const auto t0 = Clock::now();
  for (;;) {
    bool all = true;
    for (auto& a : asked) {
      int done = 1;
      if (a.answer->req != MPI_REQUEST_NULL) MPI_Test(&a.answer->req, &done, MPI_STATUS_IGNORE);
      all = all && done;
    }
    serve();  // a peer timing out at the same moment asks this rank too
    if (all || std::chrono::duration<double>(Clock::now() - t0).count() > grace_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto now = Clock::now();
  std::string text;
  auto add = [&](const std::string& s) { text += (text.empty() ? "" : "; ") + s; };
  for (auto& a : asked) {
    Reply& answer = *a.answer;
    abandoned_.push_back(std::move(a.question));  // MPI may still touch unanswered ones
    abandoned_.push_back(std::move(a.answer));
    const std::string who = "rank " + std::to_string(a.rank) + " (" +
                            (a.rank < static_cast<int64_t>(hosts_.size()) ? hosts_[a.rank] : "") +
                            ")";
    if (answer.req == MPI_REQUEST_NULL) {
      answer.body.label[kLabelBytes - 1] = '\0';
      const std::string theirs = answer.body.label;
      if (theirs == label) continue;  // it arrived
      if (answer.body.waited_ms < 0)
        add(who + " is not waiting in any operation");
      else
        add(who + " is waiting in " + theirs + " instead (for " +
            seconds_text(static_cast<double>(answer.body.waited_ms) / 1000) + " s)");
    } else {
      const Seen& s = seen_[static_cast<size_t>(a.rank)];
      add(who + " never arrived (no answer: busy outside heddle's waits, or hung); last seen " +
          (s.label.empty() ? std::string("never (no operation with it completed)")
                           : seconds_text(std::chrono::duration<double>(now - s.at).count()) +
                                 " s ago at " + s.label));
    }
  }
  if (text.empty()) text = "every member arrived, but the transport did not deliver";
  return text;
}

}  // namespace heddle
