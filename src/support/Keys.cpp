#include "heddle/support/Keys.h"

#include <algorithm>
#include <cctype>

#include "heddle/support/Strings.h"

namespace heddle {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// True when the letters of `a` appear in order in `b` ("deps" in "dependencies").
bool subsequence(std::string_view a, std::string_view b) {
  size_t i = 0;
  for (char c : b)
    if (i < a.size() && std::tolower(static_cast<unsigned char>(a[i])) ==
                            std::tolower(static_cast<unsigned char>(c)))
      ++i;
  return !a.empty() && i == a.size();
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& valid) {
  std::string best;
  std::pair<size_t, size_t> best_d;
  for (const std::string& v : valid) {
    const size_t raw = edit_distance(name, v);
    // An abbreviation or its expansion ("mem" for "memory", "dependencies" for "deps") is close;
    // among equally close names the fewer edits win.
    size_t d = raw;
    if (subsequence(name, v) || subsequence(v, name)) d = std::min(d, size_t{1});
    if (best.empty() || std::pair{d, raw} < best_d) best = v, best_d = {d, raw};
  }
  return best;
}

Status check_keys(const std::vector<std::string>& keys, const std::vector<std::string>& valid,
                  const std::string& file, const std::string& where) {
  for (const std::string& k : keys) {
    if (std::find(valid.begin(), valid.end(), k) != valid.end()) continue;
    return Diagnostic(SourceLoc{file, 0, 0}, "unknown key '" + k + "'" +
                                                 (where.empty() ? "" : " in " + where) +
                                                 "; did you mean '" + closest_name(k, valid) +
                                                 "'? (valid keys: " + join(valid, ", ") + ")");
  }
  return {};
}

}  // namespace heddle
