#include "heddle/runtime/ProgramTemplate.h"

#include <algorithm>
#include <utility>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

// The devices holding the same data as `device` for a value placed by `s`: those that differ
// only along the axes that shard it, ascending (built axis by axis, major to minor, without
// visiting the rest of the mesh).
std::vector<int64_t> shard_group(const Mesh& mesh, const TensorSharding& s, int64_t device) {
  IVec c = mesh.coords(device);
  std::vector<int64_t> group = {0}, next;
  for (int64_t a = 0; a < mesh.rank(); ++a) {
    next.clear();
    for (int64_t g : group) {
      if (!s.at(a).is_shard()) {
        next.push_back(g * mesh.size(a) + c[a]);
        continue;
      }
      for (int64_t x = 0; x < mesh.size(a); ++x) next.push_back(g * mesh.size(a) + x);
    }
    std::swap(group, next);
  }
  return group;
}

}  // namespace

DeviceProgram instantiate(const Graph& g, const ProgramTemplate& t, int64_t device) {
  HEDDLE_ASSERT(device >= 0 && device < t.mesh.num_devices()) << "device " << device;
  DeviceProgram p{device, {}};
  p.instrs.reserve(t.instrs.size());
  auto index_box = [&](OpId op) {
    return t.strategies[op].local_index_box(g.op(op).space, t.mesh, device);
  };
  // The device's group along each mesh axis, computed once (a dp=128 gradient all-reduce per
  // parameter would otherwise rebuild the same 128 members each time).
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(t.mesh.rank()));
  auto group = [&](int32_t axis) -> const std::vector<int64_t>& {
    auto& gr = groups[axis];
    if (gr.empty()) gr = t.mesh.group(axis, device);
    return gr;
  };
  // Ring attention: the member whose block a device holds at ring step or block `s` (its own
  // at 0, then the previous member's, and so on around the ring), and that block of `v`.
  auto ring_block = [&](const InstrTemplate& it, ValueId v) {
    const auto& members = group(it.axis);
    const auto n = static_cast<int64_t>(members.size());
    const int64_t pos = std::find(members.begin(), members.end(), device) - members.begin();
    const int64_t q = members[static_cast<size_t>(((pos - it.ring) % n + n) % n)];
    return t.shardings[it.sharding].local_box(g.type(v).shape(), t.mesh, q);
  };
  for (const InstrTemplate& it : t.instrs) {
    Instr in;
    in.kind = it.kind;
    in.value = it.value;
    in.ring = it.ring;
    switch (it.kind) {
      case Instr::Kind::kLoad:
        in.box = t.shardings[it.sharding].local_box(g.type(it.value).shape(), t.mesh, device);
        break;
      case Instr::Kind::kCollective:
        in.collective = it.collective;
        in.monoid = it.monoid;
        in.group = group(it.axis);
        if (it.ring >= 0) {
          in.box = ring_block(it, it.value);
          in.whole = t.shardings[it.whole].local_box(g.type(it.value).shape(), t.mesh, device);
          break;
        }
        in.box = t.shardings[it.sharding].local_box(g.type(it.value).shape(), t.mesh, device);
        break;
      case Instr::Kind::kFetch:
        in.box = g.op(it.op)
                     .inputs[it.input]
                     .proj.image(index_box(it.op))
                     .intersect(Box::of_shape(g.type(it.value).shape()));
        in.group = shard_group(t.mesh, t.shardings[it.sharding], device);
        break;
      case Instr::Kind::kKernel:
        if (it.ring >= 0) {  // one call over the index points that read the arrived block
          const OpId op = it.calls.front();
          in.whole = index_box(op);
          const auto& proj = g.op(op).inputs[static_cast<size_t>(it.input)].proj;
          const Box blk = ring_block(it, g.op(op).inputs[static_cast<size_t>(it.input)].value);
          const int64_t off = proj.map().offset()[it.ring_tensor_dim];
          std::vector<int64_t> lo(in.whole.start().values()), hi(in.whole.end().values());
          lo[it.ring_dim] =
              std::clamp(blk.start()[it.ring_tensor_dim] - off, lo[it.ring_dim], hi[it.ring_dim]);
          hi[it.ring_dim] =
              std::clamp(blk.end()[it.ring_tensor_dim] - off, lo[it.ring_dim], hi[it.ring_dim]);
          Box box(IVec(std::move(lo)), IVec(std::move(hi)));
          if (it.hidden) {  // the part the mask does not hide (none: no call)
            box = visible_part(*it.hidden, g.op(op), box);
            if (box.empty()) continue;
          }
          in.calls.push_back({op, std::move(box)});
          in.combine = it.combine;
          break;
        }
        for (OpId op : it.calls) in.calls.push_back({op, index_box(op)});
        in.temporaries = it.temporaries;
        break;
      case Instr::Kind::kFree:
        break;
    }
    p.instrs.push_back(std::move(in));
  }
  return p;
}

}  // namespace heddle
