// libFuzzer target: the pipeline placement JSON reader. Whatever it accepts must write back to
// JSON that it accepts again.
#include <cstdint>
#include <string_view>

#include "FuzzCheck.h"
#include "heddle/pipeline/PlacementJson.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = heddle::pipeline::parse_placement_json(text, "fuzz.json");
  if (!p.ok()) return 0;
  std::string out = heddle::pipeline::placement_to_json(*p);
  auto again = heddle::pipeline::parse_placement_json(out, "again.json");
  HEDDLE_FUZZ_CHECK(again.ok());
  return 0;
}
