#include "heddle/sharding/Recompute.h"

#include <string>

#include "heddle/support/Assert.h"

namespace heddle {

Result<Recompute> parse_recompute(std::string_view text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return Diagnostic("unknown recompute '" + std::string(text) + "'; known: none, selective, full");
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  HEDDLE_UNREACHABLE();
}

}  // namespace heddle
