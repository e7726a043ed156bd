#include "heddle/ir/Zigzag.h"

namespace heddle {

int64_t zigzag_position(int64_t x, int64_t extent, int64_t chunks) {
  if (chunks <= 1) return x;
  const int64_t c = extent / chunks, j = x / c;
  const int64_t chunk = j % 2 == 0 ? j / 2 : chunks - 1 - j / 2;
  return chunk * c + x % c;
}

int64_t zigzag_coordinate(int64_t pos, int64_t extent, int64_t chunks) {
  if (chunks <= 1) return pos;
  const int64_t c = extent / chunks, chunk = pos / c;
  const int64_t j = chunk < chunks / 2 ? 2 * chunk : 2 * (chunks - 1 - chunk) + 1;
  return j * c + pos % c;
}

}  // namespace heddle
