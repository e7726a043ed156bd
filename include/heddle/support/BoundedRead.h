// Reading an input file with a bound on its size: a huge or endless input (a 50 GB file by
// mistake, /dev/zero, a pipe that never ends) is an error naming the file and the bound within
// the time it takes to read the bound, never a process the kernel kills for its memory.
#pragma once

#include <cstdint>
#include <string>

#include "heddle/support/Result.h"

namespace heddle {

/// Options of read_file_bounded().
struct BoundedReadOptions {
  /// The most bytes the file may hold. Default 256 MiB (kMaxTextInputBytes of Limits.h).
  int64_t max_bytes = int64_t{256} << 20;
  /// What the file is, for messages: "model file", "cluster file" ... Default "file".
  std::string what = "file";
  /// The option that sets the bound, named in the message so the user can raise it (empty:
  /// none). Default empty.
  std::string raise_with;
};

/// The whole contents of `path` (a regular file, a pipe, a character device or `-`... anything
/// open() reads), read in chunks. Diagnostics, each naming `path`: it cannot be opened or read
/// (with the system's reason); it is a directory; it holds more than `options.max_bytes` bytes
/// (known from its size for a regular file, before anything is read; for a stream after reading
/// one byte more than the bound), which names the bound.
Result<std::string> read_file_bounded(const std::string& path,
                                      const BoundedReadOptions& options = {});

}  // namespace heddle
