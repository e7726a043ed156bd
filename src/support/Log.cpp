// The stderr log behind Log.h.
#include "heddle/support/Log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <mutex>

namespace heddle {

namespace {

std::mutex g_mu;
LogConfig g_config;

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

std::string now_iso() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms.count()));
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void emit(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* p = line.data();
  size_t n = line.size();
  while (n > 0) {
    ssize_t k = ::write(STDERR_FILENO, p, n);
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
}

std::string prefix_of(const LogConfig& c) {
  if (c.rank < 0) return "heddle";
  return c.host.empty() ? fmt::format("heddle: rank {}", c.rank)
                        : fmt::format("heddle: rank {} ({})", c.rank, c.host);
}

void write_record(const LogConfig& c, LogLevel level, std::string_view event, std::string_view text,
                  std::initializer_list<LogNumber> numbers, bool text_has_level) {
  std::string line;
  if (c.json) {
    line = fmt::format("{{\"time\":\"{}\",\"level\":\"{}\",\"event\":{}", now_iso(),
                       level_name(level), json_string(event));
    if (c.rank >= 0) line += fmt::format(",\"rank\":{},\"host\":{}", c.rank, json_string(c.host));
    line += ",\"message\":" + json_string(text);
    for (const auto& [k, v] : numbers)
      line += fmt::format(",{}:{}", json_string(k), json_number(v));
    line += "}\n";
  } else {
    if (c.timestamps) line = now_iso() + " ";
    line += prefix_of(c) + ": ";
    if (!text_has_level) line += std::string(level_name(level)) + ": ";
    line += text;
    for (const auto& [k, v] : numbers) line += fmt::format(" {}={}", k, json_number(v));
    line += "\n";
  }
  emit(line);
}

}  // namespace

Result<LogLevel> parse_log_level(std::string_view text) {
  if (text == "error") return LogLevel::kError;
  if (text == "warn" || text == "warning") return LogLevel::kWarn;
  if (text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  return Diagnostic("--log-level " + std::string(text) + ": use error, warn, info or debug");
}

void configure_logging(const LogConfig& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = config;
}

LogConfig logging_config() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_config;
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(logging_config().level);
}

void log(LogLevel level, std::string_view event, std::string_view message,
         std::initializer_list<LogNumber> numbers) {
  LogConfig c = logging_config();
  if (static_cast<int>(level) > static_cast<int>(c.level)) return;
  write_record(c, level, event, message, numbers, false);
}

void log_failure(const Diagnostic& d, int exit_code) {
  LogConfig c = logging_config();
  if (c.json)
    write_record(c, LogLevel::kError, "failure", d.to_string(),
                 {{"exit_code", static_cast<double>(exit_code)}}, true);
  else
    write_record(c, LogLevel::kError, "failure", d.to_string(), {}, true);
}

std::string log_prefix() { return prefix_of(logging_config()); }

}  // namespace heddle
