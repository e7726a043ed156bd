#include "heddle/runtime/ArenaPlan.h"

#include <algorithm>
#include <numeric>

#include "heddle/support/Assert.h"

namespace heddle {

ArenaLayout plan_arena(const std::vector<ArenaRequest>& requests, int64_t alignment) {
  HEDDLE_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0) << "alignment " << alignment;
  auto round = [&](int64_t b) { return (b + alignment - 1) & ~(alignment - 1); };
  ArenaLayout out;
  out.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first (ties: earliest first), so big buffers claim low offsets and small ones fill
  // the gaps between them.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  struct Placed {
    int64_t first, last, begin, end;
  };
  std::vector<Placed> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of overlapping placed buffers
  for (size_t i : order) {
    const ArenaRequest& r = requests[i];
    HEDDLE_ASSERT(r.bytes >= 0 && r.first <= r.last) << "request " << i;
    if (r.bytes == 0) continue;
    int64_t size = round(r.bytes);
    busy.clear();
    for (const Placed& p : placed)
      if (p.first <= r.last && r.first <= p.last) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = 0, at = 0;
    for (const auto& [b, e] : busy) {
      if (b - at >= size && (best < 0 || b - at < best_gap)) {
        best = at;
        best_gap = b - at;
      }
      at = std::max(at, e);
    }
    if (best < 0) best = at;  // above every overlapping buffer
    out.offsets[i] = best;
    placed.push_back({r.first, r.last, best, best + size});
    out.bytes = std::max(out.bytes, best + size);
  }
  return out;
}

}  // namespace heddle
