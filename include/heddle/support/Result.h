// Result<T>: a value or a Diagnostic. The channel for user errors; invariants use HEDDLE_ASSERT.
#pragma once

#include <utility>
#include <variant>

#include "heddle/support/Assert.h"
#include "heddle/support/Diagnostic.h"

namespace heddle {

/// Either a `T` or the Diagnostic explaining why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  /// A successful result.
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  /// A failed result.
  Result(Diagnostic error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The value. Precondition: ok().
  T& value() & {
    HEDDLE_ASSERT(ok()) << "value() of a failed Result: " << error().to_string();
    return std::get<0>(v_);
  }
  const T& value() const& {
    HEDDLE_ASSERT(ok()) << "value() of a failed Result: " << error().to_string();
    return std::get<0>(v_);
  }
  T&& value() && {
    HEDDLE_ASSERT(ok()) << "value() of a failed Result: " << error().to_string();
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// The error. Precondition: !ok().
  const Diagnostic& error() const {
    HEDDLE_ASSERT(!ok()) << "error() of a successful Result";
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Diagnostic> v_;
};

/// Success or a Diagnostic, for operations without a value.
class [[nodiscard]] Status {
 public:
  /// Success.
  Status() = default;
  /// Failure.
  Status(Diagnostic error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  /// The error. Precondition: !ok().
  const Diagnostic& error() const {
    HEDDLE_ASSERT(!ok_) << "error() of a successful Status";
    return error_;
  }

 private:
  Diagnostic error_;
  bool ok_ = true;
};

}  // namespace heddle

/// Evaluates a Status or Result expression and returns its Diagnostic from the caller on failure.
#define HEDDLE_TRY(expr)                               \
  do {                                                 \
    auto&& heddle_try_ = (expr);                       \
    if (!heddle_try_.ok()) return heddle_try_.error(); \
  } while (0)
