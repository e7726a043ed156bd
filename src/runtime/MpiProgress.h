// Where each MPI rank is, private to the MPI backend: every wait is named by its operation and its
// number within the step ("all-reduce over devices [0, 1] (#37 of step 3)"), each rank answers
// peers' questions about where it waits on a communicator of its own, and after a timeout the
// waiting rank asks the members that did not arrive, so the message names them: those that do not
// answer (busy or hung outside heddle's waits) with when this rank last saw them, and those
// waiting in another operation with that operation.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace heddle {

/// One rank's end of the progress side channel. Not thread-safe (the rank's one thread).
class ProgressChannel {
 public:
  /// Collective over MPI_COMM_WORLD (duplicates it). `hosts`: every rank's host name.
  ProgressChannel(int rank, std::vector<std::string> hosts);
  ~ProgressChannel();
  ProgressChannel(const ProgressChannel&) = delete;
  ProgressChannel& operator=(const ProgressChannel&) = delete;

  /// Step `step` begins (1-based; 0 before the first): operations are numbered within a step.
  void set_step(int64_t step);

  /// This rank starts waiting in `what` (e.g. `all-reduce over devices [0, 1]`), numbered within
  /// the step per `stream` (a collective's group, so that every member numbers it alike; other
  /// kinds of wait use negative keys of their own); returns its name with the number, which
  /// answers to peers carry while the wait lasts.
  std::string begin(const std::string& what, const std::vector<int64_t>& stream);

  /// The operation begun last completed: each of `members` was seen at it.
  void end(const std::vector<int64_t>& members);

  /// Answers peers' questions that arrived (call while waiting).
  void serve();

  /// After the operation `label` timed out: asks each of `members` other than this rank where it
  /// is, waits up to `grace_s` seconds for answers, and says which never arrived and where the
  /// others wait instead, e.g. `rank 1 (host) never arrived (no answer: busy outside heddle's
  /// waits, or hung); last seen 2.1 s before at all-reduce over devices [0, 1] (#36 of step 3)`.
  std::string missing(const std::string& label, const std::vector<int64_t>& members,
                      double grace_s);

 private:
  using Clock = std::chrono::steady_clock;
  struct Seen {
    std::string label;  ///< empty: never seen at a completed operation
    Clock::time_point at;
  };
  struct Reply;

  int rank_;
  std::vector<std::string> hosts_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int64_t step_ = 0;
  std::map<std::vector<int64_t>, int64_t> counts_;  // operations per stream in this step
  std::string current_;                             // the operation waited in ("" when none)
  Clock::time_point since_;
  std::vector<Seen> seen_;  // per rank
  MPI_Request query_req_ = MPI_REQUEST_NULL;
  int64_t query_buf_ = 0;
  std::vector<std::unique_ptr<Reply>> replies_;    // answers in flight
  std::vector<std::unique_ptr<Reply>> abandoned_;  // MPI may still write into these
};

}  // namespace heddle
