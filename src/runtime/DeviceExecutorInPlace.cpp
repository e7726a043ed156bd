// DeviceExecutor's arena layout, with results written over the input tiles that die where they
// are computed: an elementwise gradient sum or an activation's gradient then writes over the tile
// it reads (in the cache, just read) instead of a tile of its own, and the arena holds one tile
// less while it runs.
#include <algorithm>
#include <limits>
#include <utility>

#include "DeviceExecutorSteps.h"
#include "heddle/ops/Chain.h"
#include "heddle/runtime/ArenaPlan.h"

namespace heddle {

void DeviceExecutor::carry_view_lifetimes(std::vector<Buffer>& buffers) {
  // A view is always defined after what it views, so one pass from the last buffer down carries
  // lifetimes through views of views.
  for (size_t i = buffers.size(); i-- > 0;)
    if (int src = buffers[i].view_of; src >= 0)
      buffers[src].last = std::max(buffers[src].last, buffers[i].last);
}

ArenaLayout DeviceExecutor::plan_buffers(std::vector<Buffer>& buffers,
                                         const std::vector<Step>& steps, bool in_place) {
  constexpr int64_t kKept = std::numeric_limits<int64_t>::max();  // an output's last use
  auto requests = [&] {
    std::vector<ArenaRequest> r;
    r.reserve(buffers.size());
    for (const Buffer& b : buffers) r.push_back({b.first, b.last, b.bytes});
    return r;
  };
  ArenaLayout apart = plan_arena(requests());
  if (!in_place) return apart;
  struct Shared {
    int result, input;
    int64_t bytes, last;  // the result's bytes and the input's last use before sharing
  };
  std::vector<Shared> shared;
  for (const Step& s : steps) {
    if (s.kind != Instr::Kind::kKernel || s.instr->ring >= 0 || s.calls.size() != 1) continue;
    const Call& c = s.calls[0];
    if (c.out_buffers.size() != 1) continue;
    const int r = c.out_buffers[0];
    Buffer& out = buffers[r];
    if (out.bytes == 0 || out.view_of >= 0 || out.last == kKept) continue;
    for (size_t k = 0; k < c.in_buffers.size(); ++k) {
      const int b = c.in_buffers[k];
      Buffer& in = buffers[b];
      // A tile read after this call (its last use later), a feed's, one whose bytes another
      // buffer also names (a view of it, or it a view), or of another shape stays as it is.
      if (in.last != out.first || in.loaded || in.viewed || in.view_of >= 0 ||
          in.tensor.dtype() != out.tensor.dtype() || in.tensor.region() != out.tensor.region() ||
          !kernels::writes_in_place(*c.op, k))
        continue;
      shared.push_back({r, b, out.bytes, in.last});
      out.bytes = 0;
      out.view_of = b;
      in.viewed = true;
      break;
    }
  }
  if (shared.empty()) return apart;
  carry_view_lifetimes(buffers);
  ArenaLayout layout = plan_arena(requests());
  if (layout.bytes <= apart.bytes) return layout;
  // The greedy layout is not monotone: fewer live bytes can still place worse. Keep the tiles
  // apart then (an input is shared at most once: it is viewed from then on).
  for (const Shared& x : shared) {
    buffers[x.result].bytes = x.bytes;
    buffers[x.result].view_of = -1;
    buffers[x.input].viewed = false;
    buffers[x.input].last = x.last;
  }
  return apart;
}

}  // namespace heddle
