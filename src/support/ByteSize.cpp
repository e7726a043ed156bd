#include "heddle/support/ByteSize.h"

#include <cmath>
#include <string>
#include <utility>

namespace heddle {

Result<double> parse_bytes(const std::string& text, const std::string& what) {
  static const std::pair<const char*, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  double scale = 1;
  std::string num = text;
  for (const auto& [u, s] : units) {
    std::string unit(u);
    if (num.size() > unit.size() && num.compare(num.size() - unit.size(), unit.size(), unit) == 0) {
      num = num.substr(0, num.size() - unit.size());
      scale = s;
      break;
    }
  }
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(num, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != num.size() || !(v > 0) || !std::isfinite(v))
    return Diagnostic(what + " '" + text + "' is not a size; use e.g. 80GiB, 16GB or 1e10");
  return v * scale;
}

}  // namespace heddle
