// Op attributes: named values (int, float, string, int list) printed as `{stride=[2, 2],
// eps=1e-05}`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace heddle {

/// The kinds of attribute values.
enum class AttrType : uint8_t { kInt, kFloat, kString, kInts };

/// One attribute value.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

/// The type of a value.
AttrType attr_type(const AttrValue& v);
/// `int`, `float`, `string`, `int list`.
std::string attr_type_name(AttrType t);
/// Text form: `3`, `1e-05` (always with `.`, `e`, `inf` or `nan` so it reads back as a float),
/// `"mk,kn->mn"` (quote_string, TextQuote.h), `[1, 2]`.
std::string attr_to_string(const AttrValue& v);

/// Attributes of an op, ordered by name so printing is deterministic.
using Attrs = std::map<std::string, AttrValue>;

/// `{a=1, b="x"}`, or the empty string when there are none.
std::string attrs_to_string(const Attrs& attrs);

}  // namespace heddle
