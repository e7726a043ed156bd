#include "heddle/support/Strings.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace heddle {

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  const char* first = s.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string human_count(double n) {
  const char* suffix[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::fabs(n);
  while (a >= 1000.0 && i < 6) {
    a /= 1000.0;
    n /= 1000.0;
    ++i;
  }
  if (i == 0) return fmt::format("{:.0f}", n);
  return fmt::format("{:.2f}{}", n, suffix[i]);
}

std::string human_bytes(double bytes) {
  const char* suffix[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (std::fabs(bytes) >= 1024.0 && i < 5) {
    bytes /= 1024.0;
    ++i;
  }
  if (i == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.2f} {}", bytes, suffix[i]);
}

std::string divisors_text(int64_t n) {
  std::vector<int64_t> small, large;  // d <= sqrt(n) ascending; n / d descending
  for (int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  std::vector<std::string> parts;
  for (size_t k = 0; k < small.size() && k < 16; ++k) parts.push_back(std::to_string(small[k]));
  return join(parts, ", ");
}

}  // namespace heddle
