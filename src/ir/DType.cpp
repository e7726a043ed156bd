#include "heddle/ir/DType.h"

#include "heddle/support/Assert.h"

namespace heddle {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "f32", 4}, {DType::kF16, "f16", 2}, {DType::kBF16, "bf16", 2},
    {DType::kI32, "i32", 4}, {DType::kI64, "i64", 8}, {DType::kBool, "bool", 1},
};
const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  HEDDLE_UNREACHABLE() << "dtype " << static_cast<int>(t);
}
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

int64_t dtype_bytes(DType t) { return info(t).bytes; }

bool dtype_is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

}  // namespace heddle
