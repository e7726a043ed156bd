#include "heddle/support/Assert.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace heddle {

namespace {

std::atomic<AssertHandler> g_handler{nullptr};  // nullptr: abort_on_assert

}  // namespace

std::string AssertionFailure::to_string() const {
  std::string s = std::string(file) + ":" + std::to_string(line) + ": " + condition + " failed";
  if (!message.empty()) s += ": " + message;
  return s;
}

void abort_on_assert(const AssertionFailure& failure) {
  std::fprintf(stderr, "internal error: %s\n", failure.to_string().c_str());
  std::fflush(stderr);
  std::abort();
}

void throw_on_assert(const AssertionFailure& failure) { throw InternalError(failure); }

AssertHandler set_assert_handler(AssertHandler handler) {
  AssertHandler old = g_handler.exchange(handler);
  return old ? old : abort_on_assert;
}

namespace detail {

void internal_error(const char* file, int line, const char* cond, const std::string& message) {
  const AssertionFailure failure{file, line, cond, message};
  if (AssertHandler h = g_handler.load()) h(failure);
  abort_on_assert(failure);
}

}  // namespace detail
}  // namespace heddle
