// NumPy `.npy` files: reading and writing dense C-order arrays as heddle Tensors, so `heddle run`
// takes inputs from, and hands outputs to, Python.
#pragma once

#include <string>

#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Reads a version 1.0-3.0 `.npy` file holding a C-order array of float32, float64 (narrowed to
/// f32), int64, int32 or bool (widened to heddle's int64 storage). Diagnostics name the file and
/// the header field at fault (magic, descr, fortran_order, shape, data size). A file (or stream)
/// larger than `max_bytes` is refused naming the bound, before it is read whole (default
/// limits::kMaxNpyBytes; callers that know the array they expect pass a tighter bound).
Result<Tensor> read_npy(const std::string& path, int64_t max_bytes = int64_t{4} << 30);

/// Parses the bytes of an `.npy` file; `path` only names it in diagnostics.
Result<Tensor> parse_npy(const std::string& bytes, const std::string& path);

/// Writes `t` as a version 1.0 `.npy` file: float dtypes as `<f4`, i64/i32 as `<i8`, bool as
/// `|b1`. Precondition: `t` is a whole tensor (its origin is zero). Errors name the path.
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace heddle
