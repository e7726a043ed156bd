// Internal asserts: broken invariants (heddle's own bugs) abort with the condition, the place and
// a message. User mistakes never reach these; they are Diagnostics returned as values.
#pragma once

#include <sstream>
#include <string>

namespace heddle::detail {

/// Prints `internal error: file:line: condition failed: message` to stderr and aborts.
[[noreturn]] void internal_error(const char* file, int line, const char* cond,
                                 const std::string& message);

/// Collects a streamed message, then fails when destroyed (used by HEDDLE_ASSERT).
class AssertFailure {
 public:
  AssertFailure(const char* file, int line, const char* cond)
      : file_(file), line_(line), cond_(cond) {}
  [[noreturn]] ~AssertFailure() { internal_error(file_, line_, cond_, out_.str()); }
  template <class T>
  AssertFailure& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  const char* cond_;
  std::ostringstream out_;
};

}  // namespace heddle::detail

/// `HEDDLE_ASSERT(cond) << "context";` aborts when `cond` is false. For invariants only.
#define HEDDLE_ASSERT(cond) \
  if (cond) {               \
  } else                    \
    ::heddle::detail::AssertFailure(__FILE__, __LINE__, #cond)

/// Marks code that must be unreachable.
#define HEDDLE_UNREACHABLE() ::heddle::detail::AssertFailure(__FILE__, __LINE__, "unreachable")

/// `HEDDLE_DEBUG_ASSERT(cond) << "context";`: HEDDLE_ASSERT in debug builds (NDEBUG unset); in
/// release builds the condition is not evaluated. For checks on hot paths whose invariant the
/// verifier already guarantees (e.g. a kernel's windows inside its tiles).
#ifdef NDEBUG
#define HEDDLE_DEBUG_ASSERT(cond) \
  if (true) {                     \
  } else                          \
    ::heddle::detail::AssertFailure(__FILE__, __LINE__, #cond)
#else
#define HEDDLE_DEBUG_ASSERT(cond) HEDDLE_ASSERT(cond)
#endif
