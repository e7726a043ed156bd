#include "heddle/runtime/InstrProfile.h"

#include <algorithm>
#include <map>

#include "heddle/sharding/CommCost.h"
#include "heddle/support/Assert.h"

namespace heddle {

namespace {

const AttrValue* attr(const Op& op, const char* name) {
  auto it = op.attrs.find(name);
  return it == op.attrs.end() ? nullptr : &it->second;
}

// A window op's taps (a convolution's weight shape) and the attributes other than the defaults:
// ` 3x3 stride [2, 2] groups 32`.
std::string window_detail(const Graph& g, const Op& op) {
  std::string s;
  const Operand* w = op.kind == OpKind::kConv2d || op.kind == OpKind::kConv2dGradInput
                         ? &op.inputs[1]
                     : op.kind == OpKind::kConv2dGradWeight ? &op.results[0]
                                                            : nullptr;
  if (w != nullptr && g.type(w->value).rank() == 4) {
    const auto& shape = g.type(w->value).shape();
    s += " " + std::to_string(shape[2]) + "x" + std::to_string(shape[3]);
  }
  for (const char* name : {"kernel", "stride", "dilation"}) {
    const AttrValue* v = attr(op, name);
    if (v == nullptr || attr_type(*v) != AttrType::kInts) continue;
    const auto& xs = std::get<std::vector<int64_t>>(*v);
    if (std::string(name) != "kernel" &&
        std::all_of(xs.begin(), xs.end(), [](int64_t x) { return x == 1; }))
      continue;
    s += std::string(" ") + name + " " + attr_to_string(*v);
  }
  const AttrValue* groups = attr(op, "groups");
  if (const int64_t* n = groups ? std::get_if<int64_t>(groups) : nullptr; n && *n > 1)
    s += " groups " + std::to_string(*n);
  const AttrValue* mode = attr(op, "mode");
  if (const std::string* m = mode ? std::get_if<std::string>(mode) : nullptr) s += " " + *m;
  return s;
}

std::string op_label(const Graph& g, const Op& op) {
  std::string s(op_kind_name(op.kind));
  if (op.kind == OpKind::kEinsum) return s + " " + attr_to_string(*attr(op, "spec"));
  if (op_kind_info(op.kind).category == OpCategory::kWindow) return s + window_detail(g, op);
  const AttrValue* fn = attr(op, "fn");
  if (const std::string* f = fn ? std::get_if<std::string>(fn) : nullptr) return s + " " + *f;
  return s;
}

}  // namespace

std::string instr_label(const Graph& g, const Instr& in) {
  switch (in.kind) {
    case Instr::Kind::kLoad:
      return "load";
    case Instr::Kind::kFetch:
      return "halo fetch";
    case Instr::Kind::kCollective:
      return std::string(collective_name(in.collective));
    case Instr::Kind::kFree:
      return "free";
    case Instr::Kind::kKernel:
      break;
  }
  HEDDLE_ASSERT(!in.calls.empty()) << "a kernel instruction without calls";
  // A chain: its first op as a lone kernel is labelled, then the others' kinds.
  std::string s = op_label(g, g.op(in.calls[0].op));
  if (in.calls.size() == 1) return s;
  s = "fused " + s;
  for (size_t k = 1; k < in.calls.size(); ++k)
    s += "+" + std::string(op_kind_name(g.op(in.calls[k].op).kind));
  return s;
}

std::vector<ProfileRow> profile_rows(const Graph& g, const DeviceProgram& program,
                                     const InstrTimes& times) {
  if (times.runs <= 0) return {};
  HEDDLE_ASSERT(times.seconds.size() == program.instrs.size())
      << "instruction times recorded on another program";
  std::map<std::string, ProfileRow> by_label;
  double total = 0;
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const Instr& in = program.instrs[i];
    if (in.kind == Instr::Kind::kFree) continue;
    ProfileRow& r = by_label[instr_label(g, in)];
    const double per_run = times.seconds[i] / static_cast<double>(times.runs);
    ++r.calls;
    r.seconds += per_run;
    total += per_run;
  }
  std::vector<ProfileRow> rows;
  for (auto& [label, r] : by_label) {
    r.label = label;
    r.share = total > 0 ? r.seconds / total : 0;
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return rows;
}

}  // namespace heddle
