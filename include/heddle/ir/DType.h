// Element types of tensors: f32, f16, bf16, i32, i64, bool.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace heddle {

/// A tensor element type.
enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kBool };

/// The text name: `f32`, `f16`, `bf16`, `i32`, `i64`, `bool`.
std::string_view dtype_name(DType t);
/// Parses a text name; nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element (bool takes one byte).
int64_t dtype_bytes(DType t);
/// True for f32, f16 and bf16.
bool dtype_is_float(DType t);

}  // namespace heddle
