#include "heddle/ir/Attribute.h"

#include <fmt/format.h>

#include "heddle/ir/TextQuote.h"
#include "heddle/support/Assert.h"

namespace heddle {

AttrType attr_type(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

std::string attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "int list";
  }
  HEDDLE_UNREACHABLE();
}

namespace {
std::string float_text(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // n: inf, nan
  return s;
}
}  // namespace

std::string attr_to_string(const AttrValue& v) {
  switch (attr_type(v)) {
    case AttrType::kInt:
      return std::to_string(std::get<int64_t>(v));
    case AttrType::kFloat:
      return float_text(std::get<double>(v));
    case AttrType::kString:
      return quote_string(std::get<std::string>(v));
    case AttrType::kInts: {
      std::string s = "[";
      const auto& xs = std::get<std::vector<int64_t>>(v);
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
      return s + "]";
    }
  }
  HEDDLE_UNREACHABLE();
}

std::string attrs_to_string(const Attrs& attrs) {
  if (attrs.empty()) return "";
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : attrs) {
    if (!first) s += ", ";
    first = false;
    s += k + "=" + attr_to_string(v);
  }
  return s + "}";
}

}  // namespace heddle
