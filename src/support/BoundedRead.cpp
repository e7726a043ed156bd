// Size-bounded reads of input files and streams behind BoundedRead.h.
#include "heddle/support/BoundedRead.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "heddle/support/Strings.h"

namespace heddle {

namespace {

Diagnostic too_large(const std::string& path, const BoundedReadOptions& o,
                     const std::string& size) {
  return Diagnostic(SourceLoc{path, 0, 0},
                    "the " + o.what + " " + size + "; the limit is " +
                        human_bytes(static_cast<double>(o.max_bytes)) + " (" +
                        std::to_string(o.max_bytes) + " bytes)" +
                        (o.raise_with.empty() ? "" : "; raise it with " + o.raise_with));
}

}  // namespace

Result<std::string> read_file_bounded(const std::string& path, const BoundedReadOptions& o) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Diagnostic(SourceLoc{path, 0, 0},
                      "cannot open the " + o.what + ": " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return Diagnostic(SourceLoc{path, 0, 0}, "the " + o.what + " is a directory");
    if (S_ISREG(st.st_mode) && st.st_size > o.max_bytes)
      return too_large(path, o, "holds " + human_bytes(static_cast<double>(st.st_size)));
  }
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  // Large chunks read straight into the result: a stream reaches the bound in a few hundred reads.
  constexpr size_t kChunk = size_t{1} << 20;
  size_t used = 0;
  for (;;) {
    if (out.size() < used + kChunk) out.resize(used + kChunk);
    ssize_t k = ::read(fd, out.data() + used, kChunk);
    if (k < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      return Diagnostic(SourceLoc{path, 0, 0},
                        "cannot read the " + o.what + ": " + std::strerror(err));
    }
    if (k == 0) break;
    used += static_cast<size_t>(k);
    if (static_cast<int64_t>(used) > o.max_bytes)
      return too_large(path, o, "holds more than the limit (a stream or a growing file)");
  }
  out.resize(used);
  return out;
}

}  // namespace heddle
