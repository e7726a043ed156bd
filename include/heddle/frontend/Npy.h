// NumPy `.npy` files: reading and writing dense C-order arrays as heddle Tensors, so `heddle run`
// takes inputs from, and hands outputs to, Python.
#pragma once

#include <string>

#include "heddle/ops/Tensor.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Reads a version 1.0-3.0 `.npy` file holding a C-order array of float32, float64 (narrowed to
/// f32), int64, int32 or bool (widened to heddle's int64 storage). Diagnostics name the file and
/// the header field at fault (magic, descr, fortran_order, shape, data size).
Result<Tensor> read_npy(const std::string& path);

/// Parses the bytes of an `.npy` file; `path` only names it in diagnostics.
Result<Tensor> parse_npy(const std::string& bytes, const std::string& path);

/// Writes `t` as a version 1.0 `.npy` file: float dtypes as `<f4`, i64/i32 as `<i8`, bool as
/// `|b1`. Precondition: `t` is a whole tensor (its origin is zero). Errors name the path.
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace heddle
