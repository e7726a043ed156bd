// Internal asserts: broken invariants (heddle's own bugs) stop with the condition, the place and
// a message. User mistakes never reach these; they are Diagnostics returned as values. What a
// failed assert does is a process-wide hook: print and abort (the default, the CLI's exit 2), or
// throw InternalError (the Python module, which must survive heddle's bugs).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace heddle {

/// A failed HEDDLE_ASSERT: where, which condition, and the streamed message.
struct AssertionFailure {
  const char* file = "";
  int line = 0;
  const char* condition = "";
  std::string message;
  /// `file:line: condition failed: message` (without `: message` when it is empty).
  std::string to_string() const;
};

/// What a failed assert does. A handler must not return (throw, or end the process); when one
/// returns, the default runs after it.
using AssertHandler = void (*)(const AssertionFailure&);

/// The default handler: prints `internal error: ` and the failure to stderr, then aborts (the CLI
/// turns SIGABRT into exit code 2).
[[noreturn]] void abort_on_assert(const AssertionFailure& failure);

/// The exception throw_on_assert() throws. what() is AssertionFailure::to_string().
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const AssertionFailure& failure)
      : std::logic_error(failure.to_string()), failure_(failure) {}
  /// The failed assert.
  const AssertionFailure& failure() const { return failure_; }

 private:
  AssertionFailure failure_;
};

/// A handler that throws InternalError on the thread whose assert failed. Hosts that install it
/// must catch: an assert in a destructor or a noexcept function still ends the process
/// (std::terminate). The runtime carries an InternalError thrown on a device thread to the thread
/// that started the run (ThreadedRunner, PipelineRunner).
[[noreturn]] void throw_on_assert(const AssertionFailure& failure);

/// Installs `handler` for every thread of the process and returns the one it replaces; nullptr
/// restores abort_on_assert. Set it before any thread may assert (e.g. when a module loads).
AssertHandler set_assert_handler(AssertHandler handler);

namespace detail {

/// Calls the installed handler with the failure (the default's when it returns).
[[noreturn]] void internal_error(const char* file, int line, const char* cond,
                                 const std::string& message);

/// Collects a streamed message, then fails when destroyed (used by HEDDLE_ASSERT). The destructor
/// may throw (throw_on_assert); it runs at the end of the assert's statement.
class AssertFailure {
 public:
  AssertFailure(const char* file, int line, const char* cond)
      : file_(file), line_(line), cond_(cond) {}
  [[noreturn]] ~AssertFailure() noexcept(false) { internal_error(file_, line_, cond_, out_.str()); }
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

}  // namespace detail
}  // namespace heddle

/// `HEDDLE_ASSERT(cond) << "context";` fails (see set_assert_handler) when `cond` is false. For
/// invariants only.
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
