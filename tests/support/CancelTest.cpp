// The cancellation flag: first reason wins, clear resets, visible across threads.
#include <gtest/gtest.h>

#include <thread>

#include "heddle/support/Cancel.h"

namespace heddle {
namespace {

TEST(Cancel, FirstReasonWinsUntilCleared) {
  clear_cancel();
  EXPECT_FALSE(cancel_requested());
  EXPECT_EQ(cancel_reason(), CancelReason::kNone);
  request_cancel(CancelReason::kInterrupt);
  request_cancel(CancelReason::kTerminate);
  EXPECT_TRUE(cancel_requested());
  EXPECT_EQ(cancel_reason(), CancelReason::kInterrupt);
  clear_cancel();
  EXPECT_FALSE(cancel_requested());
  request_cancel(CancelReason::kTerminate);
  EXPECT_EQ(cancel_reason(), CancelReason::kTerminate);
  clear_cancel();
}

TEST(Cancel, SeenByAPollingThread) {
  clear_cancel();
  std::thread worker([] {
    while (!cancel_requested()) std::this_thread::yield();
  });
  request_cancel();
  worker.join();  // hangs (and the test times out) if the store were never seen
  EXPECT_EQ(cancel_reason(), CancelReason::kRequested);
  clear_cancel();
}

}  // namespace
}  // namespace heddle
