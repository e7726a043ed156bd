// libFuzzer target: the JSON cluster-file reader. Whatever it accepts must describe itself and map
// every axis of a few meshes onto a link class.
#include <cstdint>
#include <string_view>

#include "FuzzCheck.h"
#include "heddle/cost/Cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = heddle::cost::cluster_from_json(text, "fuzz.json");
  if (!c.ok()) return 0;
  HEDDLE_FUZZ_CHECK(c->count >= 1 && c->devices_per_node >= 1);
  (void)c->to_string();
  (void)c->hash();
  for (int64_t stage : {int64_t{1}, c->devices_per_node, c->count}) (void)c->stage_link(stage);
  return 0;
}
