#include "heddle/runtime/Program.h"

#include <algorithm>

#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Assert.h"
#include "heddle/support/Strings.h"

namespace heddle {

Box box_hull(const Box& a, const Box& b) {
  HEDDLE_ASSERT(a.rank() == b.rank()) << a.to_string() << " and " << b.to_string();
  if (a.empty()) return b;
  if (b.empty()) return a;
  std::vector<int64_t> s(static_cast<size_t>(a.rank())), e(static_cast<size_t>(a.rank()));
  for (int64_t d = 0; d < a.rank(); ++d) {
    s[d] = std::min(a.start()[d], b.start()[d]);
    e[d] = std::max(a.end()[d], b.end()[d]);
  }
  return Box(IVec(std::move(s)), IVec(std::move(e)));
}

std::map<ValueId, Box> load_hulls(const DeviceProgram& p) {
  std::map<ValueId, Box> hull;
  for (const Instr& in : p.instrs) {
    if (in.kind != Instr::Kind::kLoad) continue;
    auto [it, fresh] = hull.emplace(in.value, in.box);
    if (!fresh) it->second = box_hull(it->second, in.box);
  }
  return hull;
}

std::string DeviceProgram::to_string(const Graph& g, const Mesh& mesh) const {
  auto name = [&](ValueId v) { return value_ref(g.value(v).name); };
  auto group_text = [](const std::vector<int64_t>& group) {
    std::vector<std::string> s;
    for (int64_t d : group) s.push_back(std::to_string(d));
    return "{" + join(s, ",") + "}";
  };
  std::string s = "# device " + std::to_string(device) + " of mesh " + mesh.to_string() +
                  ", coords " + mesh.coords(device).to_string() + "\n";
  for (const Instr& in : instrs) {
    switch (in.kind) {
      case Instr::Kind::kLoad:
        s += "load " + name(in.value) + " " + in.box.to_string();
        break;
      case Instr::Kind::kCollective:
        s += std::string(collective_name(in.collective)) + " " + name(in.value) + " group " +
             group_text(in.group) + " -> " + in.box.to_string();
        if (in.ring >= 0)
          s += " (ring step " + std::to_string(in.ring) + " into " + in.whole.to_string() + ")";
        break;
      case Instr::Kind::kFetch:
        s += "fetch " + name(in.value) + " group " + group_text(in.group) + " -> " +
             in.box.to_string();
        break;
      case Instr::Kind::kKernel: {
        std::vector<std::string> calls;
        for (const auto& c : in.calls) {
          const Op& op = g.op(c.op);
          calls.push_back(name(op.results[0].value) + " = " + std::string(op_kind_name(op.kind)) +
                          " " + c.box.to_string());
        }
        s += (in.calls.size() > 1 ? "fused " : "kernel ") + join(calls, "; ");
        if (in.ring >= 0)
          s += " (ring block " + std::to_string(in.ring) + " of " + in.whole.to_string() +
               (in.combine ? ", combined" : "") + ")";
        break;
      }
      case Instr::Kind::kFree:
        s += "free " + name(in.value);
        break;
    }
    s += "\n";
  }
  return s;
}

}  // namespace heddle
