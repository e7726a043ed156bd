// libFuzzer target: the .npy reader. Whatever it accepts must hold exactly the elements its shape
// says.
#include <cstdint>
#include <string>

#include "FuzzCheck.h"
#include "heddle/frontend/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto t = heddle::parse_npy(bytes, "fuzz.npy");
  if (!t.ok()) return 0;
  int64_t n = 1;
  for (int64_t d : t->shape()) n *= d;
  HEDDLE_FUZZ_CHECK(n == t->numel());
  return 0;
}
