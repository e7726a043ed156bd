// The process's log on stderr: levels, optional timestamps, a prefix naming the process (an MPI
// rank and its host), and a JSON-lines form (`--json`) so that a run that dies still leaves a
// machine-readable trail. One line per record, written whole (safe from several threads).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "heddle/support/Diagnostic.h"
#include "heddle/support/Result.h"

namespace heddle {

/// How much the log says; each level includes the ones above it.
enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

/// `error`, `warn`, `info`, `debug`; a diagnostic listing them otherwise.
Result<LogLevel> parse_log_level(std::string_view text);

/// How the log is written. Set once at start-up (configure_logging), read everywhere.
struct LogConfig {
  LogLevel level = LogLevel::kWarn;  ///< records above this level are dropped (default warn)
  bool timestamps = false;           ///< text lines start with an ISO-8601 UTC time (default off)
  bool json = false;  ///< JSON lines instead of text (default off); always timestamped
  int64_t rank = -1;  ///< the MPI rank this process is, or -1 (default): named in records
  std::string host;   ///< this process's host name, named with the rank (default empty)
};

/// Replaces the process's log configuration.
void configure_logging(const LogConfig& config);
/// The current configuration.
LogConfig logging_config();
/// True when a record of `level` would be written.
bool log_enabled(LogLevel level);

/// A number attached to a record (`"step": 3` in JSON; `step=3` in text).
using LogNumber = std::pair<const char*, double>;

/// Writes one record: in text `[time ]heddle[: rank R (host)]: LEVEL: message [k=v ...]`, in
/// JSON `{"time":..,"level":..,"event":..,"rank":..,"host":..,"message":..,k:v..}`. `event`
/// names the kind of record (`step`, `failure`, `start`, ...).
void log(LogLevel level, std::string_view event, std::string_view message,
         std::initializer_list<LogNumber> numbers = {});

/// Writes a failure record (level error, event `failure`) for `d` with the exit code it leads
/// to: the diagnostic's text (`file:line: error: message`) after the prefix.
void log_failure(const Diagnostic& d, int exit_code);

/// The prefix of this process's text records: `heddle` or `heddle: rank R (host)`.
std::string log_prefix();

}  // namespace heddle
