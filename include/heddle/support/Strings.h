// Small string helpers shared by the text forms: joining, integer parsing, human-readable sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace heddle {

/// Joins `parts` with `sep`.
std::string join(const std::vector<std::string>& parts, std::string_view sep);

/// Parses a whole string as a signed 64-bit decimal integer; nullopt on any junk or overflow.
std::optional<int64_t> parse_int(std::string_view s);

/// Formats a count with SI suffixes for people: 1234567 -> "1.23M".
std::string human_count(double n);

/// Formats bytes with binary suffixes: 1536 -> "1.50 KiB".
std::string human_bytes(double bytes);

/// The smallest divisors of `n` (at most 16), ascending: `1, 2, 3, 4, 6, 12`, the hint of
/// divisibility diagnostics; empty for n <= 0. Takes O(sqrt(n)) steps.
std::string divisors_text(int64_t n);

}  // namespace heddle
