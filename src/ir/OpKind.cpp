#include "heddle/ir/OpKind.h"

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

std::vector<AttrSpec> parse_schema(std::string_view schema) {
  std::vector<AttrSpec> specs;
  while (!schema.empty()) {
    size_t comma = schema.find(',');
    std::string_view entry = schema.substr(0, comma);
    schema = comma == std::string_view::npos ? "" : schema.substr(comma + 1);
    size_t colon = entry.find(':');
    HEDDLE_ASSERT(colon != std::string_view::npos && colon + 1 < entry.size())
        << "bad attribute schema entry " << std::string(entry);
    AttrSpec s{std::string(entry.substr(0, colon)), AttrType::kInt, entry.back() == '!'};
    switch (entry[colon + 1]) {
      case 'i':
        s.type = AttrType::kInt;
        break;
      case 'f':
        s.type = AttrType::kFloat;
        break;
      case 's':
        s.type = AttrType::kString;
        break;
      case 'I':
        s.type = AttrType::kInts;
        break;
      default:
        HEDDLE_UNREACHABLE() << "attribute type in " << std::string(entry);
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

std::vector<OpKindInfo> build_table() {
  std::vector<OpKindInfo> t;
#define HEDDLE_X(e, n, c, mi, ma, r, s) \
  t.push_back({OpKind::e, n, OpCategory::c, mi, ma, r, parse_schema(s)});
  HEDDLE_OP_KINDS(HEDDLE_X)
#undef HEDDLE_X
  return t;
}

}  // namespace

const AttrSpec* OpKindInfo::find_attr(std::string_view attr) const {
  for (const auto& a : attrs)
    if (a.name == attr) return &a;
  return nullptr;
}

const std::vector<OpKindInfo>& all_op_kinds() {
  static const std::vector<OpKindInfo> table = build_table();
  return table;
}

const OpKindInfo& op_kind_info(OpKind kind) {
  const auto& t = all_op_kinds();
  auto i = static_cast<size_t>(kind);
  HEDDLE_ASSERT(i < t.size()) << "op kind " << i;
  return t[i];
}

std::string_view op_kind_name(OpKind kind) { return op_kind_info(kind).name; }

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const auto& k : all_op_kinds())
    if (k.name == name) return k.kind;
  return std::nullopt;
}

bool is_elementwise(OpKind kind) {
  OpCategory c = op_kind_info(kind).category;
  return c == OpCategory::kUnary || c == OpCategory::kBinary || c == OpCategory::kSelect;
}

}  // namespace heddle
