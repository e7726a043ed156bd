// Sizes in bytes as people write them on a command line: `80GiB`, `16GB`, `1.5e9`.
#pragma once

#include <string>

#include "heddle/support/Result.h"

namespace heddle {

/// `text` as a positive, finite number of bytes: a number with an optional unit (KiB, MiB, GiB,
/// TiB powers of 1024; KB, MB, GB, TB powers of 1000; B). The diagnostic names `what` (the flag
/// or keyword that gave it): `--memory 'x' is not a size; use e.g. 80GiB, 16GB or 1e10`.
Result<double> parse_bytes(const std::string& text, const std::string& what = "--memory");

}  // namespace heddle
