// Atomic, checked file output: a file heddle writes either appears whole or not at all. The bytes
// go to a temporary file in the same directory, are flushed to disk (fsync) and renamed over the
// target; any failure removes the temporary and says why in the system's words (strerror). Also
// the checks that an output location is writable, so long work is not started for nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "heddle/support/Result.h"

namespace heddle {

/// A file being written atomically. Bytes appended with write() land in a temporary file beside
/// `path`; commit() makes them `path` in one rename. Destroying an uncommitted AtomicFile (an
/// error, an exception) removes the temporary, so `path` keeps its previous contents.
class AtomicFile {
 public:
  /// Creates the temporary `<dir>/.<name>.tmp.<pid>.<n>`. Check ok() (or the Status of open()).
  static Result<AtomicFile> open(const std::string& path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  /// Appends `n` bytes. Diagnostic (naming the file and the system's reason, e.g. "No space left
  /// on device"): the write failed; the temporary is removed and later calls fail too.
  Status write(const void* data, size_t n);
  Status write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }

  /// Flushes the data to disk (fsync), renames the temporary over the target and syncs the
  /// directory. Diagnostic as write(); the temporary is removed on failure. Call at most once.
  Status commit();

  /// The target path.
  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  /// Closes and removes the temporary; the diagnostic says `what` failed and why (`err`).
  Diagnostic fail(const std::string& what, int err);

  std::string path_, temp_;
  int fd_ = -1;
};

/// Writes `bytes` to `path` atomically (AtomicFile: temporary, fsync, rename). Diagnostic naming
/// the file and the system's reason; on failure `path` is left as it was.
Status write_file_atomic(const std::string& path, std::string_view bytes);

/// Removes the temporaries of every AtomicFile not yet committed or destroyed, for a process about
/// to end without unwinding (a second Ctrl-C, a watchdog's _exit). Not async-signal-safe: call it
/// from a thread, not a signal handler.
void remove_pending_atomic_files() noexcept;

/// Checks, without writing anything, that a file can be created or replaced at `path`: its
/// directory exists, is a directory and is writable, and `path` is not a directory. For
/// validating `--output`, `--trace` and the like before long work starts. `flag` names the
/// option in the message (may be empty).
Status check_writable_file(const std::string& path, const std::string& flag = "");

/// Checks that `dir` can hold new files: it is a writable directory, or does not exist and its
/// parent is a writable directory (so it can be created). Creates nothing. `flag` as above.
Status check_writable_dir(const std::string& dir, const std::string& flag = "");

/// Creates `dir` (and missing parents, like mkdir -p) unless it is a directory already.
/// Diagnostic naming the directory and the system's reason.
Status make_dirs(const std::string& dir);

}  // namespace heddle
