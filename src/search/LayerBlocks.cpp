#include "heddle/search/LayerBlocks.h"

#include <functional>
#include <vector>

#include "heddle/ir/Attribute.h"

namespace heddle::search {

int64_t RepeatedBlocks::block_of(int64_t id) const {
  if (count == 0 || id < start) return -1;
  int64_t b = (id - start) / length;
  return b < count ? b : count;
}

namespace {

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t op_hash(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  size_t h = mix(0, static_cast<size_t>(op.kind));
  h = mix(h, std::hash<std::string>()(attrs_to_string(op.attrs)));
  h = mix(h, op.space.hash());
  for (const Operand& in : op.inputs) {
    const Value& v = g.value(in.value);
    h = mix(h, in.proj.hash());
    h = mix(h, v.type.hash());
    h = mix(h, static_cast<size_t>(v.role));
    if (v.role == ValueRole::kResult)
      h = mix(mix(h, static_cast<size_t>(id - v.producer)), static_cast<size_t>(v.result_index));
  }
  for (const Operand& r : op.results) h = mix(mix(h, r.proj.hash()), g.type(r.value).hash());
  return h;
}

}  // namespace

RepeatedBlocks find_repeated_blocks(const Graph& g) {
  const int64_t n = g.num_ops();
  std::vector<size_t> h(static_cast<size_t>(n));
  for (OpId id = 0; id < n; ++id) h[static_cast<size_t>(id)] = op_hash(g, id);
  RepeatedBlocks best;
  for (int64_t k = 2; 2 * k <= n; ++k) {
    // Runs of i with h[i] == h[i + k]: a run of r such positions from s holds
    // floor(r / k) + 1 blocks of length k.
    int64_t run = 0;
    for (int64_t i = 0; i + k <= n; ++i) {
      bool same = i + k < n && h[static_cast<size_t>(i)] == h[static_cast<size_t>(i + k)];
      if (same) {
        ++run;
        continue;
      }
      if (run >= k) {
        int64_t s = i - run, count = run / k + 1;
        if (count * k > best.count * best.length) best = {s, k, count};
      }
      run = 0;
    }
  }
  return best;
}

}  // namespace heddle::search
