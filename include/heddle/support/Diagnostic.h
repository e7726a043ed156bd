// Diagnostics: user errors as values. A diagnostic carries a message and, where there is one, the
// source location (`file:line:col`) of the input that caused it.
#pragma once

#include <string>
#include <utility>

namespace heddle {

/// A position in a user's input file. Lines and columns count from 1; 0 means "unknown".
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;

  /// True when at least the file is known.
  bool known() const { return !file.empty(); }
  /// `file:line:col`, `file:line` or `file`, whichever parts are known; empty when unknown.
  std::string to_string() const;
  bool operator==(const SourceLoc&) const = default;
};

/// One user-facing error: a whole sentence that says what is wrong and, where it can, what to do.
struct Diagnostic {
  SourceLoc loc;
  std::string message;

  Diagnostic() = default;
  /// A diagnostic without a location.
  explicit Diagnostic(std::string msg) : message(std::move(msg)) {}
  /// A diagnostic tied to an input location.
  Diagnostic(SourceLoc where, std::string msg) : loc(std::move(where)), message(std::move(msg)) {}

  /// `file:line:col: error: message`, or `error: message` without a location.
  std::string to_string() const;
  bool operator==(const Diagnostic&) const = default;
};

}  // namespace heddle
