// The assertion-handler hook: the default prints and aborts (the CLI's exit 2); throw_on_assert
// turns a failed assert into InternalError carrying the place, condition and message.
#include <gtest/gtest.h>

#include <thread>

#include "heddle/support/Assert.h"

namespace heddle {
namespace {

// Installs a handler for one test and restores the previous one.
class HandlerScope {
 public:
  explicit HandlerScope(AssertHandler h) : old_(set_assert_handler(h)) {}
  ~HandlerScope() { set_assert_handler(old_); }

 private:
  AssertHandler old_;
};

const int kAssertLine = __LINE__ + 1;
void fail_with(int value) { HEDDLE_ASSERT(value == 0) << "value " << value; }
const std::string kPlace = "AssertTest.cpp:" + std::to_string(kAssertLine);

TEST(Assert, ThrowingHandlerRaisesInternalErrorWithPlaceConditionAndMessage) {
  HandlerScope scope(throw_on_assert);
  try {
    fail_with(7);
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.failure().line, kAssertLine);
    EXPECT_STREQ(e.failure().condition, "value == 0");
    EXPECT_EQ(e.failure().message, "value 7");
    const std::string what = e.what();
    EXPECT_NE(what.find(kPlace + ": value == 0 failed: value 7"), std::string::npos) << what;
  }
}

TEST(Assert, PassingAssertsDoNotCallTheHandler) {
  HandlerScope scope(throw_on_assert);
  EXPECT_NO_THROW(fail_with(0));
}

TEST(Assert, TheHandlerIsProcessWideAndThrowsOnTheAssertingThread) {
  HandlerScope scope(throw_on_assert);
  std::string seen;
  std::thread t([&] {
    try {
      fail_with(3);
    } catch (const InternalError& e) {
      seen = e.failure().message;
    }
  });
  t.join();
  EXPECT_EQ(seen, "value 3");
}

TEST(Assert, SetReturnsThePreviousHandlerAndNullRestoresTheDefault) {
  AssertHandler old = set_assert_handler(throw_on_assert);
  EXPECT_EQ(set_assert_handler(nullptr), throw_on_assert);
  EXPECT_EQ(set_assert_handler(old), abort_on_assert);
}

TEST(AssertDeathTest, TheDefaultHandlerPrintsAndAborts) {
  EXPECT_DEATH(fail_with(5), "internal error: .*" + kPlace + ": value == 0 failed: value 5");
}

}  // namespace
}  // namespace heddle
