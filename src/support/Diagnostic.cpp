#include "heddle/support/Diagnostic.h"

namespace heddle {

std::string SourceLoc::to_string() const {
  if (file.empty()) return "";
  std::string s = file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (col > 0) s += ":" + std::to_string(col);
  }
  return s;
}

std::string Diagnostic::to_string() const {
  std::string where = loc.to_string();
  return (where.empty() ? "" : where + ": ") + "error: " + message;
}

}  // namespace heddle
