// SIGINT/SIGTERM as cancellation (support/CancelSignals.h), each in a child process: work that
// polls stops and the process exits normally; work that does not is ended by the watchdog with
// the signal's code after the grace period; a second signal ends it at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "heddle/support/Cancel.h"
#include "heddle/support/CancelSignals.h"

namespace heddle {
namespace {

class CancelSignals : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Work that polls the flag: it returns, and the process exits with its own code.
[[noreturn]] void polling_work(int sig) {
  install_cancel_signals(5.0);
  std::raise(sig);
  while (!cancel_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  _exit(cancel_reason() == CancelReason::kTerminate ? 7 : 8);
}

// Work that never polls: only the watchdog (or a second signal) ends it.
[[noreturn]] void deaf_work(int sig, int signals, double grace_s) {
  install_cancel_signals(grace_s);
  for (int i = 0; i < signals; ++i) std::raise(sig);
  std::this_thread::sleep_for(std::chrono::seconds(20));
  _exit(0);
}

TEST_F(CancelSignals, PollingWorkStopsByItself) {
  EXPECT_EXIT(polling_work(SIGTERM), ::testing::ExitedWithCode(7), "");
  EXPECT_EXIT(polling_work(SIGINT), ::testing::ExitedWithCode(8), "");
}

TEST_F(CancelSignals, TheWatchdogEndsWorkThatDoesNotPoll) {
  EXPECT_EXIT(deaf_work(SIGINT, 1, 0.1), ::testing::ExitedWithCode(130), "interrupted");
  EXPECT_EXIT(deaf_work(SIGTERM, 1, 0.1), ::testing::ExitedWithCode(143), "SIGTERM");
}

TEST_F(CancelSignals, ASecondSignalEndsTheProcessAtOnce) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EXIT(deaf_work(SIGTERM, 2, 30), ::testing::ExitedWithCode(143), "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
}

}  // namespace
}  // namespace heddle
